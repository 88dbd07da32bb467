//! Minimal `.npy` and safetensors readers/writers for the attention command.

use std::collections::BTreeMap;
use std::path::Path;

use fragmask::host::attention::numeric::{bf16_to_f32, f16_to_f32, f32_to_bf16};

/// Element storage of a host tensor.
#[derive(Debug, Clone)]
pub enum Data {
    F32(Vec<f32>),
    F16(Vec<u16>),
    Bf16(Vec<u16>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    Bool(Vec<bool>),
}

/// A host tensor read from a file.
#[derive(Debug, Clone)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Data,
}

impl Tensor {
    /// The elements as bf16 bits (f32 and f16 are rounded to nearest even).
    pub fn to_bf16(&self) -> Result<Vec<u16>, String> {
        Ok(match &self.data {
            Data::Bf16(v) => v.clone(),
            Data::F32(v) => v.iter().map(|&x| f32_to_bf16(x)).collect(),
            Data::F16(v) => v.iter().map(|&x| f32_to_bf16(f16_to_f32(x))).collect(),
            other => {
                return Err(format!(
                    "expected a float tensor, got {}",
                    dtype_name(other)
                ))
            }
        })
    }

    pub fn to_i32(&self) -> Result<Vec<i32>, String> {
        match &self.data {
            Data::I32(v) => Ok(v.clone()),
            Data::U32(v) => Ok(v.iter().map(|&x| x as i32).collect()),
            other => Err(format!(
                "expected an int32 tensor, got {}",
                dtype_name(other)
            )),
        }
    }

    pub fn to_u32(&self) -> Result<Vec<u32>, String> {
        match &self.data {
            Data::U32(v) => Ok(v.clone()),
            Data::I32(v) => Ok(v.iter().map(|&x| x as u32).collect()),
            other => Err(format!(
                "expected a uint32/int32 tensor, got {}",
                dtype_name(other)
            )),
        }
    }

    pub fn to_bool(&self) -> Result<Vec<bool>, String> {
        match &self.data {
            Data::Bool(v) => Ok(v.clone()),
            Data::I32(v) => Ok(v.iter().map(|&x| x != 0).collect()),
            Data::U32(v) => Ok(v.iter().map(|&x| x != 0).collect()),
            Data::F32(v) => Ok(v.iter().map(|&x| x != 0.0).collect()),
            other => Err(format!("expected a bool tensor, got {}", dtype_name(other))),
        }
    }
}

fn dtype_name(d: &Data) -> &'static str {
    match d {
        Data::F32(_) => "float32",
        Data::F16(_) => "float16",
        Data::Bf16(_) => "bfloat16",
        Data::I32(_) => "int32",
        Data::U32(_) => "uint32",
        Data::Bool(_) => "bool",
    }
}

fn le_u16(b: &[u8]) -> Vec<u16> {
    b.chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}
fn le_u32(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn decode(dtype: &str, bytes: &[u8], n: usize) -> Result<Data, String> {
    let need = |size: usize| {
        if bytes.len() != n * size {
            Err(format!("{} bytes for {n} elements of {dtype}", bytes.len()))
        } else {
            Ok(())
        }
    };
    Ok(match dtype {
        "F32" | "<f4" => {
            need(4)?;
            Data::F32(le_u32(bytes).into_iter().map(f32::from_bits).collect())
        }
        "F16" | "<f2" => {
            need(2)?;
            Data::F16(le_u16(bytes))
        }
        "BF16" => {
            need(2)?;
            Data::Bf16(le_u16(bytes))
        }
        "I32" | "<i4" => {
            need(4)?;
            Data::I32(le_u32(bytes).into_iter().map(|x| x as i32).collect())
        }
        "U32" | "<u4" => {
            need(4)?;
            Data::U32(le_u32(bytes))
        }
        "BOOL" | "U8" | "|b1" | "|u1" => {
            need(1)?;
            Data::Bool(bytes.iter().map(|&b| b != 0).collect())
        }
        other => return Err(format!("unsupported dtype {other}")),
    })
}

/// Reads a C-order little-endian `.npy` (float32, float16, int32, uint32, bool, uint8).
pub fn read_npy(path: &Path) -> Result<Tensor, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(format!("{}: not a .npy file", path.display()));
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        _ => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
    };
    let header =
        std::str::from_utf8(&bytes[start..start + header_len]).map_err(|e| e.to_string())?;
    let field = |key: &str| -> Option<&str> {
        let at = header.find(&format!("'{key}'"))? + key.len() + 2;
        let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
        Some(rest)
    };
    let descr = field("descr")
        .and_then(|r| r.strip_prefix('\'')?.split('\'').next())
        .ok_or("npy: no descr")?;
    if field("fortran_order").is_some_and(|r| r.starts_with("True")) {
        return Err(format!(
            "{}: Fortran-order arrays are not supported",
            path.display()
        ));
    }
    let shape_text = field("shape")
        .and_then(|r| r.strip_prefix('(')?.split(')').next())
        .ok_or("npy: no shape")?;
    let shape: Vec<usize> = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .map_err(|_| format!("npy: bad shape {shape_text}"))
        })
        .collect::<Result<_, _>>()?;
    let n = shape.iter().product();
    let data = decode(descr, &bytes[start + header_len..], n)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Tensor { shape, data })
}

/// Writes float32 `.npy`.
pub fn write_npy_f32(path: &Path, shape: &[usize], values: &[f32]) -> Result<(), String> {
    let shape_text = match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape_text}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + 4 * values.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()))
}

/// Named tensors and the `__metadata__` of a safetensors file.
pub type Safetensors = (BTreeMap<String, Tensor>, BTreeMap<String, String>);

/// Reads every tensor of a safetensors file, plus its `__metadata__`.
pub fn read_safetensors(path: &Path) -> Result<Safetensors, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() < 8 {
        return Err(format!("{}: too short for safetensors", path.display()));
    }
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value =
        serde_json::from_slice(bytes.get(8..8 + n).ok_or("safetensors: truncated header")?)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    let base = 8 + n;
    let mut tensors = BTreeMap::new();
    let mut metadata = BTreeMap::new();
    for (name, info) in header
        .as_object()
        .ok_or("safetensors: header is not an object")?
    {
        if name == "__metadata__" {
            if let Some(m) = info.as_object() {
                for (k, v) in m {
                    metadata.insert(k.clone(), v.as_str().unwrap_or_default().to_string());
                }
            }
            continue;
        }
        let dtype = info["dtype"].as_str().ok_or("safetensors: dtype")?;
        let shape: Vec<usize> = info["shape"]
            .as_array()
            .ok_or("safetensors: shape")?
            .iter()
            .map(|v| {
                v.as_u64()
                    .map(|x| x as usize)
                    .ok_or("safetensors: shape entry")
            })
            .collect::<Result<_, _>>()?;
        let offs = info["data_offsets"]
            .as_array()
            .ok_or("safetensors: data_offsets")?;
        let (a, b) = (
            offs[0].as_u64().unwrap_or(0) as usize,
            offs[1].as_u64().unwrap_or(0) as usize,
        );
        let slice = bytes
            .get(base + a..base + b)
            .ok_or("safetensors: data out of range")?;
        let count = shape.iter().product();
        let data = decode(dtype, slice, count)
            .map_err(|e| format!("{}: tensor {name}: {e}", path.display()))?;
        tensors.insert(name.clone(), Tensor { shape, data });
    }
    Ok((tensors, metadata))
}

/// A tensor to write into a safetensors file.
pub enum Out<'a> {
    Bf16(&'a [u16]),
    F32(&'a [f32]),
}

/// Writes named tensors into one safetensors file.
pub fn write_safetensors(
    path: &Path,
    tensors: &[(&str, Vec<usize>, Out<'_>)],
) -> Result<(), String> {
    let mut header = serde_json::Map::new();
    let mut body: Vec<u8> = Vec::new();
    for (name, shape, data) in tensors {
        let start = body.len();
        let dtype = match data {
            Out::Bf16(v) => {
                v.iter()
                    .for_each(|x| body.extend_from_slice(&x.to_le_bytes()));
                "BF16"
            }
            Out::F32(v) => {
                v.iter()
                    .for_each(|x| body.extend_from_slice(&x.to_le_bytes()));
                "F32"
            }
        };
        header.insert(
            name.to_string(),
            serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [start, body.len()]}),
        );
    }
    let mut text = serde_json::Value::Object(header).to_string();
    while !text.len().is_multiple_of(8) {
        text.push(' ');
    }
    let mut out = Vec::with_capacity(8 + text.len() + body.len());
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&body);
    std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()))
}

/// bf16 bits to f32 (for .npy output).
pub fn bf16_to_f32_vec(bits: &[u16]) -> Vec<f32> {
    bits.iter().map(|&b| bf16_to_f32(b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_and_safetensors_round_trip() {
        let dir = std::env::temp_dir().join(format!("fragmask-io-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.npy");
        write_npy_f32(&p, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, -6.5]).unwrap();
        let t = read_npy(&p).unwrap();
        assert_eq!(t.shape, vec![2, 3]);
        assert!(matches!(t.data, Data::F32(ref v) if v[5] == -6.5));
        let s = dir.join("a.safetensors");
        write_safetensors(
            &s,
            &[
                ("o", vec![2], Out::Bf16(&[0x3F80, 0x4000])),
                ("lse", vec![1], Out::F32(&[0.5])),
            ],
        )
        .unwrap();
        let (m, _) = read_safetensors(&s).unwrap();
        assert_eq!(m["o"].to_bf16().unwrap(), vec![0x3F80, 0x4000]);
        assert!(matches!(m["lse"].data, Data::F32(ref v) if v[0] == 0.5));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
