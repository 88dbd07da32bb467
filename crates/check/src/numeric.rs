//! bf16 / f16 bit conversions (no `half` dependency).

/// f32 -> bf16 bits, round to nearest even; NaN stays NaN.
pub fn f32_to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) as u16) | 0x0040;
    }
    let rounding = 0x7FFF + ((bits >> 16) & 1);
    (bits.wrapping_add(rounding) >> 16) as u16
}

/// bf16 bits -> f32 (exact).
pub fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits(u32::from(b) << 16)
}

/// IEEE half bits -> f32 (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1F);
    let mant = u32::from(h & 0x3FF);
    let bits = match (exp, mant) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: value = m * 2^-24.
            let v = m as f32 * f32::powi(2.0, -24);
            return if sign != 0 { -v } else { v };
        }
        (0x1F, 0) => sign | 0x7F80_0000,
        (0x1F, m) => sign | 0x7FC0_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// Little-endian bytes of u16 values (bf16 / f16 bits).
pub fn u16_le_bytes(v: &[u16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Little-endian bytes of f32 values.
pub fn f32_le_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// bf16 bits widened to f32, as little-endian bytes (exact).
pub fn bf16_to_f32_le_bytes(v: &[u16]) -> Vec<u8> {
    v.iter()
        .flat_map(|&b| bf16_to_f32(b).to_le_bytes())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_round_trip_is_exact_on_bf16_values_and_rounds_to_nearest_even() {
        for b in [0u16, 0x3F80, 0xBF80, 0x7F7F, 0x0001, 0x8000] {
            assert_eq!(f32_to_bf16(bf16_to_f32(b)), b);
        }
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
        assert_eq!(f32_to_bf16(1.0 + f32::powi(2.0, -8)), 0x3F80);
        assert_eq!(f32_to_bf16(1.0 + 3.0 * f32::powi(2.0, -8)), 0x3F82);
        assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
    }

    #[test]
    fn f16_decodes_normals_subnormals_and_specials() {
        assert_eq!(f16_to_f32(0x3C00), 1.0);
        assert_eq!(f16_to_f32(0xC000), -2.0);
        assert_eq!(f16_to_f32(0x0001), f32::powi(2.0, -24));
        assert_eq!(f16_to_f32(0x7C00), f32::INFINITY);
        assert!(f16_to_f32(0x7E00).is_nan());
    }
}
