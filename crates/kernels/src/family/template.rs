//! A checked placeholder pass for CUDA text templates: `$NAME` (an upper-case
//! identifier, `[A-Z][A-Z0-9_]*`, longest match) is replaced by its value; values may
//! themselves hold placeholders (expanded again, a bounded number of times).
//!
//! Unlike chained `str::replace`, the pass cannot let a short name eat a longer one
//! (`$D` in `$D_CHUNKS`), and it refuses a template that names a placeholder nobody
//! provides, a value that no placeholder uses, or two values of one name: each is a
//! generator bug.

use std::collections::BTreeSet;

/// Why a template could not be filled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateError {
    /// The text holds `$NAME` with no value.
    Unknown(String),
    /// Values given that no placeholder used.
    Unused(Vec<String>),
    /// Placeholders still present after the last expansion round (a value refers to
    /// itself, directly or not).
    TooDeep(String),
    /// Two values given under one name (only the first would ever be used).
    Duplicate(String),
}

impl core::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TemplateError::Unknown(n) => write!(f, "template placeholder ${n} has no value"),
            TemplateError::Unused(names) => {
                write!(f, "template values never used: {}", names.join(", "))
            }
            TemplateError::TooDeep(n) => write!(
                f,
                "template placeholder ${n} still unexpanded after {MAX_ROUNDS} rounds"
            ),
            TemplateError::Duplicate(n) => write!(f, "template value ${n} given twice"),
        }
    }
}

impl std::error::Error for TemplateError {}

/// Expansion rounds (a value's placeholders are expanded in the next round).
pub const MAX_ROUNDS: usize = 6;

fn is_start(b: u8) -> bool {
    b.is_ascii_uppercase()
}

fn is_rest(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'
}

/// One round: every placeholder replaced once. Returns the text and whether any
/// placeholder was found.
fn round(
    text: &str,
    values: &[(&str, String)],
    used: &mut BTreeSet<String>,
) -> Result<(String, bool), TemplateError> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut i, mut last, mut found) = (0, 0, false);
    while i < bytes.len() {
        if bytes[i] == b'$' && i + 1 < bytes.len() && is_start(bytes[i + 1]) {
            let mut j = i + 2;
            while j < bytes.len() && is_rest(bytes[j]) {
                j += 1;
            }
            let name = &text[i + 1..j];
            let value = values
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v)
                .ok_or_else(|| TemplateError::Unknown(name.to_string()))?;
            out.push_str(&text[last..i]);
            out.push_str(value);
            used.insert(name.to_string());
            found = true;
            last = j;
            i = j;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[last..]);
    Ok((out, found))
}

/// Fills `template` with `values` (`(NAME, value)`, NAME without the `$`).
pub fn fill(template: &str, values: &[(&str, String)]) -> Result<String, TemplateError> {
    let mut names = BTreeSet::new();
    if let Some((n, _)) = values.iter().find(|(n, _)| !names.insert(*n)) {
        return Err(TemplateError::Duplicate(n.to_string()));
    }
    let mut used = BTreeSet::new();
    let mut text = template.to_string();
    for _ in 0..MAX_ROUNDS {
        let (next, found) = round(&text, values, &mut used)?;
        text = next;
        if !found {
            let unused: Vec<String> = values
                .iter()
                .filter(|(n, _)| !used.contains(*n))
                .map(|(n, _)| n.to_string())
                .collect();
            return if unused.is_empty() {
                Ok(text)
            } else {
                Err(TemplateError::Unused(unused))
            };
        }
    }
    let left = text
        .split('$')
        .nth(1)
        .map(|s| {
            s.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .unwrap_or_default();
    Err(TemplateError::TooDeep(left))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(pairs: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
        pairs.iter().map(|(n, x)| (*n, x.to_string())).collect()
    }

    #[test]
    fn longest_names_win_and_lowercase_ends_a_name() {
        let values = v(&[("D", "128"), ("D_CHUNKS", "2")]);
        assert_eq!(
            fill("m64n$Dk16 $D_CHUNKS $D.", &values).unwrap(),
            "m64n128k16 2 128."
        );
    }

    #[test]
    fn values_are_expanded_again() {
        let values = v(&[("OUTER", "a $INNER b"), ("INNER", "x")]);
        assert_eq!(fill("[$OUTER]", &values).unwrap(), "[a x b]");
    }

    #[test]
    fn unknown_unused_duplicate_and_cyclic_placeholders_are_errors() {
        assert_eq!(
            fill("$A", &v(&[("A", "1"), ("A", "2")])),
            Err(TemplateError::Duplicate("A".into()))
        );
        assert_eq!(
            fill("$NOPE", &v(&[])),
            Err(TemplateError::Unknown("NOPE".into()))
        );
        assert_eq!(
            fill("$A", &v(&[("A", "1"), ("B", "2")])),
            Err(TemplateError::Unused(vec!["B".into()]))
        );
        assert!(matches!(
            fill("$A", &v(&[("A", "$A")])),
            Err(TemplateError::TooDeep(_))
        ));
        // A dollar not followed by an upper-case letter is text.
        assert_eq!(fill("$1 $a $", &v(&[])).unwrap(), "$1 $a $");
    }
}
