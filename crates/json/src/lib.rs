//! Float tensors as JSON arrays of numbers, exactly: each value as the shortest decimal that
//! reads back to the same f32 (or f16), `-0.0` kept, and NaN and the infinities as the tokens
//! Python's `json` writes and reads (`NaN`, `Infinity`, `-Infinity`), which JSON itself has no
//! numbers for. A JSON writer of doubles would give an f32 17 digits (`0.30000001192092896`).
//! And the other way: the number arrays of an infer request's inputs read without making a
//! JavaScript array of them (`take_input_data`).

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

/// An infer request's JSON with the number arrays of its inputs' `data` taken out: the text
/// with each such array replaced by the string `"<marker><k>"`, and the values of array `k`
/// as read by a JSON reader of doubles. JavaScript then parses a header of a few hundred
/// bytes instead of making an array of a million numbers.
#[derive(Debug, PartialEq)]
pub struct InputData {
    pub header: Vec<u8>,
    pub arrays: Vec<Vec<f64>>,
}

/// Takes out every `inputs[i].data` that is a flat array of JSON numbers (or of the tokens
/// `NaN`, `Infinity`, `-Infinity`), and leaves everything else as it is: nested data, data
/// holding anything else, and a number beyond f64 (which must be refused as the value it
/// was written as, not taken as `Infinity`) are for the JavaScript reader. `None` when the
/// text has no such array, or is not JSON this reader can follow; the caller's own reader
/// then sees the text unchanged and gives its own error.
pub fn take_input_data(text: &[u8], marker: &str) -> Option<InputData> {
    let mut scan = Scan { b: text, i: 0, found: Vec::new() };
    scan.value(Place::Root, 0)?;
    scan.ws();
    if scan.i != text.len() || scan.found.is_empty() {
        return None;
    }
    let mut header = Vec::with_capacity(text.len() - scan.found.iter().map(|f| f.end - f.start).sum::<usize>() + scan.found.len() * (marker.len() + 8));
    let mut arrays = Vec::with_capacity(scan.found.len());
    let mut from = 0;
    for (k, found) in scan.found.into_iter().enumerate() {
        header.extend_from_slice(&text[from..found.start]);
        header.push(b'"');
        header.extend_from_slice(marker.as_bytes());
        header.extend_from_slice(k.to_string().as_bytes());
        header.push(b'"');
        from = found.end;
        arrays.push(found.values);
    }
    header.extend_from_slice(&text[from..]);
    Some(InputData { header, arrays })
}

/// Deeper JSON than this is left to the caller's reader (whose own limit then applies).
const MAX_DEPTH: usize = 256;

/// Where a value sits, as far as finding `inputs[i].data` needs to know.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    Root,
    Inputs,
    Input,
    Data,
    Other,
}

struct Found {
    start: usize,
    end: usize,
    values: Vec<f64>,
}

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
    found: Vec<Found>,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.ws();
        (self.peek()? == byte).then(|| self.i += 1)
    }

    fn value(&mut self, place: Place, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'{' => self.object(place, depth),
            b'[' => {
                if place == Place::Data {
                    let start = self.i;
                    if let Some(values) = self.numbers() {
                        self.found.push(Found { start, end: self.i, values });
                        return Some(());
                    }
                    self.i = start;
                }
                self.array(if place == Place::Inputs { Place::Input } else { Place::Other }, depth)
            }
            b'"' => self.string().map(|_| ()),
            _ => self.scalar(),
        }
    }

    fn object(&mut self, place: Place, depth: usize) -> Option<()> {
        self.i += 1;
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            self.ws();
            let key = self.string()?;
            self.eat(b':')?;
            let member = match (place, key) {
                (Place::Root, b"inputs") => Place::Inputs,
                (Place::Input, b"data") => Place::Data,
                _ => Place::Other,
            };
            self.value(member, depth + 1)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn array(&mut self, items: Place, depth: usize) -> Option<()> {
        self.i += 1;
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(());
        }
        loop {
            self.value(items, depth + 1)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A string's raw bytes between its quotes (escapes left as written: a key spelled with
    /// one is not taken for `inputs` or `data`, and the caller's reader handles it).
    fn string(&mut self) -> Option<&'a [u8]> {
        let b = self.b;
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.i + 1;
        let mut i = start;
        loop {
            match *b.get(i)? {
                b'"' => break,
                b'\\' => i += 2,
                _ => i += 1,
            }
        }
        self.i = i + 1;
        Some(&b[start..i])
    }

    /// A number or literal, as far as the next delimiter; the caller's reader checks it.
    fn scalar(&mut self) -> Option<()> {
        let start = self.i;
        while let Some(c) = self.peek() {
            if matches!(c, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r') {
                break;
            }
            self.i += 1;
        }
        (self.i > start).then_some(())
    }

    /// `[n, n, ...]` of numbers and non-finite tokens only; `None` at anything else.
    fn numbers(&mut self) -> Option<Vec<f64>> {
        self.i += 1;
        // Most numbers of a large tensor take 4 to 12 bytes.
        let mut values = Vec::with_capacity((self.b.len() - self.i) / 12);
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(values);
        }
        loop {
            self.ws();
            values.push(self.number()?);
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    values.shrink_to_fit();
                    return Some(values);
                }
                _ => return None,
            }
        }
    }

    /// One JSON number (RFC 8259 grammar, read as the nearest f64), or `NaN`, `Infinity`,
    /// `-Infinity`.
    fn number(&mut self) -> Option<f64> {
        for (token, value) in [(&b"NaN"[..], f64::NAN), (b"Infinity", f64::INFINITY), (b"-Infinity", f64::NEG_INFINITY)] {
            if self.b[self.i..].starts_with(token) {
                self.i += token.len();
                return Some(value);
            }
        }
        let start = self.i;
        let digits = |s: &mut Self| {
            let from = s.i;
            while let Some(b'0'..=b'9') = s.peek() {
                s.i += 1;
            }
            s.i - from
        };
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let int_start = self.i;
        let int = digits(self);
        if int == 0 || (int > 1 && self.b[int_start] == b'0') {
            return None;
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if digits(self) == 0 {
                return None;
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if digits(self) == 0 {
                return None;
            }
        }
        // The bytes are ASCII digits, signs, '.' and 'e' only.
        let text = std::str::from_utf8(&self.b[start..self.i]).ok()?;
        let value: f64 = text.parse().ok()?;
        value.is_finite().then_some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: &str = "@";

    fn take(text: &str) -> Option<(String, Vec<Vec<f64>>)> {
        take_input_data(text.as_bytes(), M).map(|d| (String::from_utf8(d.header).unwrap(), d.arrays))
    }

    #[test]
    fn input_data_arrays_are_taken_out_and_the_rest_kept_byte_for_byte() {
        let text = r#"{"id":"x", "inputs" : [ {"name":"a","data" : [1, -2.5e3 ,0.1,-0, 1E-2, 12345678901234567890],"shape":[6]},
            {"name":"b","data":[NaN,Infinity,-Infinity]}, {"name":"c","data":[[1,2],[3,4]]}, {"name":"d","data":[]} ],
            "outputs":[{"name":"o","data":[1,2]}], "data":[3]}"#;
        let (header, arrays) = take(text).unwrap();
        assert_eq!(
            header,
            r#"{"id":"x", "inputs" : [ {"name":"a","data" : "@0","shape":[6]},
            {"name":"b","data":"@1"}, {"name":"c","data":[[1,2],[3,4]]}, {"name":"d","data":"@2"} ],
            "outputs":[{"name":"o","data":[1,2]}], "data":[3]}"#
        );
        assert_eq!(arrays[0], vec![1.0, -2500.0, 0.1, -0.0, 0.01, 12345678901234567890.0]);
        assert!(arrays[0][3].is_sign_negative());
        assert!(arrays[1][0].is_nan());
        assert_eq!(&arrays[1][1..], &[f64::INFINITY, f64::NEG_INFINITY]);
        assert!(arrays[2].is_empty());
        assert_eq!(arrays.len(), 3);
    }

    #[test]
    fn values_read_as_a_json_reader_of_doubles_reads_them() {
        // The nearest double of each decimal, as JSON.parse gives it.
        let decimals = ["0.10000000149011612", "3.4028235677973366e38", "5e-324", "2.2250738585072011e-308", "9007199254740993", "1.7976931348623157e308", "-0.0", "0e0", "1E+2"];
        let text = format!(r#"{{"inputs":[{{"data":[{}]}}]}}"#, decimals.join(","));
        let (_, arrays) = take(&text).unwrap();
        let expected: Vec<f64> = decimals.iter().map(|d| d.parse().unwrap()).collect();
        assert_eq!(arrays[0].iter().map(|v| v.to_bits()).collect::<Vec<_>>(), expected.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    }

    #[test]
    fn arrays_holding_anything_but_numbers_are_left_to_the_caller() {
        // JSON, but not a flat array of numbers a double reader takes as written.
        for data in ["[1,true]", "[1,null]", r#"[1,"2"]"#, "[1,[2]]", "[[1],2]", "[1e400]", "[-1e400]", "[1,{}]"] {
            let text = format!(r#"{{"inputs":[{{"data":{data}}},{{"data":[7]}}]}}"#);
            let (header, arrays) = take(&text).unwrap_or_else(|| panic!("{data}: the [7] after it is still taken"));
            assert_eq!(header, format!(r#"{{"inputs":[{{"data":{data}}},{{"data":"@0"}}]}}"#), "{data}");
            assert_eq!(arrays, vec![vec![7.0]]);
        }
        // Not JSON: never taken (left as written, or the whole text left to the caller).
        for data in ["[1,]", "[,1]", "[1 2]", "[01]", "[1.]", "[.5]", "[+1]", "[1e]", "[-]", "[0x10]", "[nan]", "[infinity]", "[NaNa]", "[-NaN]", "[1,2"] {
            let text = format!(r#"{{"inputs":[{{"data":{data}}},{{"data":[7]}}]}}"#);
            if let Some((header, arrays)) = take(&text) {
                assert_eq!(header, format!(r#"{{"inputs":[{{"data":{data}}},{{"data":"@0"}}]}}"#), "{data}");
                assert_eq!(arrays, vec![vec![7.0]]);
            }
        }
    }

    #[test]
    fn only_data_of_inputs_is_taken() {
        for text in [
            r#"{"outputs":[{"data":[1]}]}"#,
            r#"{"inputs":{"data":[1]}}"#,
            r#"{"x":{"inputs":[{"data":[1]}]}}"#,
            r#"{"inputs":[[{"data":[1]}]]}"#,
            r#"{"inputs":[{"d\u0061ta":[1]}]}"#,
            r#"{"inputs":[{"parameters":{"data":[1]}}]}"#,
            r#"[{"inputs":[{"data":[1]}]}]"#,
            r#"{"inputs":[{"name":"data","x":[1]}]}"#,
        ] {
            assert_eq!(take(text), None, "{text}");
        }
    }

    #[test]
    fn text_that_is_not_json_is_left_to_the_caller() {
        for text in ["", "{", r#"{"inputs":[{"data":[1]}]"#, r#"{"inputs":[{"data":[1]}]}}"#, r#"{"inputs":[{"data":[1]}] x}"#, r#"{"inputs" [{"data":[1]}]}"#, r#"{"inputs":[{"data":[1]}"#, r#"{"inputs":[{"data":[1] "a":1}]}"#, r#"{"inputs":[{"data":[1]},]}"#, r#"{"a":"unterminated}"#] {
            assert_eq!(take(text), None, "{text}");
        }
        // Nesting deeper than the limit is left too, without exhausting the stack.
        let deep = format!(r#"{{"inputs":[{{"data":[1]}}],"x":{}{}}}"#, "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(take(&deep), None);
    }

    #[test]
    fn nesting_is_followed_to_max_depth_and_no_further() {
        // The root is depth 0, "x"'s value depth 1: k brackets put the innermost at depth k.
        let arrays = |k: usize| format!(r#"{{"inputs":[{{"data":[1]}}],"x":{}{}}}"#, "[".repeat(k), "]".repeat(k));
        assert!(take(&arrays(MAX_DEPTH)).is_some());
        assert_eq!(take(&arrays(MAX_DEPTH + 1)), None);
        let objects = |k: usize| format!(r#"{{"inputs":[{{"data":[1]}}],"x":{}1{}}}"#, r#"{"a":"#.repeat(k - 1), "}".repeat(k - 1));
        assert!(take(&objects(MAX_DEPTH)).is_some());
        assert_eq!(take(&objects(MAX_DEPTH + 1)), None);
        assert_eq!(take(&objects(100_000)), None);
    }

    #[test]
    fn empty_arrays_and_objects_elsewhere_are_stepped_over() {
        let (header, arrays) = take(r#"{"parameters":{},"outputs":[],"inputs":[{"shape":[],"parameters":{ },"data":[5]}],"x":[ ]}"#).unwrap();
        assert_eq!(header, r#"{"parameters":{},"outputs":[],"inputs":[{"shape":[],"parameters":{ },"data":"@0"}],"x":[ ]}"#);
        assert_eq!(arrays, vec![vec![5.0]]);
    }

    #[test]
    fn strings_with_escapes_and_brackets_are_skipped_whole() {
        let text = r#"{"id":"a\"],[{\\","inputs":[{"name":"]}\"{","data":[2]}]}"#;
        let (header, arrays) = take(text).unwrap();
        assert_eq!(header, r#"{"id":"a\"],[{\\","inputs":[{"name":"]}\"{","data":"@0"}]}"#);
        assert_eq!(arrays, vec![vec![2.0]]);
    }

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
