//! Float tensors as JSON arrays of numbers, exactly: each value as the shortest decimal that
//! reads back to the same f32 (or f16), `-0.0` kept, and NaN and the infinities as the tokens
//! Python's `json` writes and reads (`NaN`, `Infinity`, `-Infinity`), which JSON itself has no
//! numbers for. A JSON writer of doubles would give an f32 17 digits (`0.30000001192092896`).

use half::f16;
use std::sync::OnceLock;

/// The text of one finite value from ryu, in JSON's shortest form ("1.0" as "1"), except
/// `-0.0`: readers such as rapidjson (tritonclient's) take "-0" for the integer 0.
fn push_finite(out: &mut String, text: &str) {
    out.push_str(if text == "-0.0" { text } else { text.strip_suffix(".0").unwrap_or(text) });
}

fn push_non_finite(out: &mut String, v: f32) {
    out.push_str(if v.is_nan() {
        "NaN"
    } else if v.is_sign_positive() {
        "Infinity"
    } else {
        "-Infinity"
    });
}

/// Appends `[v0,v1,...]` for f32 values.
pub fn write_f32(values: &[f32], out: &mut String) {
    let mut buffer = ryu::Buffer::new();
    out.reserve(values.len() * 12 + 2);
    out.push('[');
    for (i, &v) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if v.is_finite() {
            push_finite(out, buffer.format_finite(v));
        } else {
            push_non_finite(out, v);
        }
    }
    out.push(']');
}

/// The shortest decimal that rounds (to nearest even) back to f16 `bits`: at most five
/// significant digits are ever needed. Finite values only.
fn shortest_f16(bits: u16) -> String {
    let value = f16::from_bits(bits).to_f64();
    for digits in 0..5 {
        let candidate = format!("{value:.digits$e}");
        let parsed: f64 = candidate.parse().unwrap_or(f64::NAN);
        if f16::from_f64(parsed).to_bits() == bits {
            // The shortest double text of that decimal is the decimal itself, in plain form.
            let mut out = String::new();
            push_finite(&mut out, ryu::Buffer::new().format_finite(parsed));
            return out;
        }
    }
    let mut out = String::new();
    push_finite(&mut out, ryu::Buffer::new().format_finite(value));
    out
}

/// The text of every f16 bit pattern, made once: 65,536 strings, then each value is a lookup.
fn f16_texts() -> &'static [String] {
    static TEXTS: OnceLock<Vec<String>> = OnceLock::new();
    TEXTS.get_or_init(|| {
        (0..=u16::MAX)
            .map(|bits| {
                let v = f16::from_bits(bits).to_f32();
                if v.is_finite() {
                    shortest_f16(bits)
                } else {
                    let mut s = String::new();
                    push_non_finite(&mut s, v);
                    s
                }
            })
            .collect()
    })
}

/// Appends `[v0,v1,...]` for f16 values given as their bits.
pub fn write_f16(bits: &[u16], out: &mut String) {
    let texts = f16_texts();
    out.reserve(bits.len() * 8 + 2);
    out.push('[');
    for (i, &b) in bits.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&texts[b as usize]);
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_text(values: &[f32]) -> String {
        let mut s = String::new();
        write_f32(values, &mut s);
        s
    }

    fn f16_text(values: &[u16]) -> String {
        let mut s = String::new();
        write_f16(values, &mut s);
        s
    }

    #[test]
    fn f32_values_are_their_shortest_round_trip_decimals() {
        assert_eq!(f32_text(&[]), "[]");
        assert_eq!(f32_text(&[0.1, 0.3, 1.0, -2.5, 0.0, -0.0, 1e30, 1.5e-7, 16777216.0]), "[0.1,0.3,1,-2.5,0,-0.0,1e30,1.5e-7,16777216]");
        assert_eq!(f32_text(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, f32::MIN_POSITIVE]), "[NaN,Infinity,-Infinity,3.4028235e38,1.1754944e-38]");
        // The smallest subnormal, and the largest value below 1.
        assert_eq!(f32_text(&[f32::from_bits(1), f32::from_bits(0x3f7f_ffff)]), "[1e-45,0.99999994]");
    }

    #[test]
    fn every_finite_f32_text_reads_back_to_the_same_bits() {
        // A spread of bit patterns over the whole range, subnormals and both signs included.
        let mut bits = 0u32;
        for _ in 0..200_000 {
            bits = bits.wrapping_mul(2_654_435_761).wrapping_add(0x9e37_79b9);
            let v = f32::from_bits(bits);
            let text = f32_text(&[v]);
            let inner = &text[1..text.len() - 1];
            if v.is_finite() {
                let back: f32 = inner.parse().unwrap();
                assert_eq!(back.to_bits(), v.to_bits(), "{inner}");
                // Never longer than ryu's own shortest digits.
                assert!(inner.len() <= ryu::Buffer::new().format_finite(v).len(), "{inner}");
            } else {
                assert!(["NaN", "Infinity", "-Infinity"].contains(&inner));
            }
        }
    }

    #[test]
    fn f16_values_are_their_shortest_f16_decimals() {
        let b = |v: f32| f16::from_f32(v).to_bits();
        // 0.1 in f16 is 0.0999755859375: "0.1" reads back to it, as f16.
        assert_eq!(f16_text(&[b(0.1), b(1.0), b(-0.0), b(65504.0), b(0.5), b(-2.0)]), "[0.1,1,-0.0,65500,0.5,-2]");
        assert_eq!(f16_text(&[0x7e00, 0x7c00, 0xfc00, 0x0001, 0x03ff, 0x0400]), "[NaN,Infinity,-Infinity,6e-8,0.000061,0.00006104]");
    }

    #[test]
    fn every_f16_text_reads_back_to_the_same_bits() {
        for bits in 0..=u16::MAX {
            let v = f16::from_bits(bits);
            let text = f16_text(&[bits]);
            let inner = &text[1..text.len() - 1];
            if v.is_nan() {
                assert_eq!(inner, "NaN");
                continue;
            }
            let back = match inner {
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                t => t.parse().unwrap(),
            };
            assert_eq!(f16::from_f64(back).to_bits(), bits, "{bits:#06x} as {inner}");
        }
    }
}
