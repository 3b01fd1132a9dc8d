//! Float tensors as JSON text for the server (the zgc-runtime-json crate, `zgc_json`): at once for small tensors, and
//! on a libuv pool thread for large ones, so that the event loop keeps answering meanwhile;
//! and the number arrays of a request's inputs read from its JSON (`zgc_json::take_input_data`).

use crate::errors::{thrown, Code, Thrown};
use zgc::dtype::Elements;
use crate::js::JsArray;
use napi::bindgen_prelude::{AsyncTask, Buffer, Float64Array, TypedArray, Uint8Array};
use napi::{Env, Task};
use napi_derive::napi;

/// The values to write, owned: a copy, so that nothing JavaScript does to the array while a
/// pool thread formats it can matter.
enum Values {
    F32(Vec<f32>),
    F16Bits(Vec<u16>),
}

impl Values {
    fn json(&self) -> String {
        text(match self {
            Values::F32(v) => Elements::F32(v),
            Values::F16Bits(v) => Elements::U16(v),
        })
    }
}

/// The JSON text of f32 values or f16 bits (what `with_values` lets through).
fn text(values: Elements<'_>) -> String {
    let mut out = String::new();
    match values {
        Elements::F32(v) => zgc_json::write_f32(v, &mut out),
        Elements::U16(v) => zgc_json::write_f16(v, &mut out),
        _ => unreachable!("with_values passes only f32 and u16"),
    }
    out
}

fn refused(given: &str) -> napi::Error<Code> {
    napi::Error::new(Code::of("ERR_ZGC_DTYPE"), format!("JSON tensor text takes a Float32Array (f32) or a Uint16Array (f16 bits), got {given}"))
}

fn with_values<R>(values: &TypedArray<'_>, f: impl FnOnce(Elements<'_>) -> R) -> napi::Result<R, Code> {
    let array = JsArray::of(values);
    match array.view() {
        Some(e @ (Elements::F32(_) | Elements::U16(_))) => Ok(f(e)),
        _ => Err(refused(&array.class_name())),
    }
}

/// `values` as a JSON array: a Float32Array as f32 values, a Uint16Array as f16 bits.
#[napi(js_name = "tensorJson")]
pub fn tensor_json(env: &Env, values: TypedArray<'_>) -> Result<String, Thrown> {
    (|| {
        with_values(&values, text)
    })()
    .map_err(thrown(env))
}

pub struct TensorJson(Values);

impl Task for TensorJson {
    type Output = Vec<u8>;
    type JsValue = Buffer;

    fn compute(&mut self) -> napi::Result<Vec<u8>> {
        Ok(self.0.json().into_bytes())
    }

    fn resolve(&mut self, _env: Env, output: Vec<u8>) -> napi::Result<Buffer> {
        Ok(output.into())
    }
}

/// As `tensorJson`, on a libuv pool thread: the values are copied now, the text made there and
/// given as its UTF-8 bytes, which a response writes as they are (a string of megabytes would
/// be made on the event loop, and encoded again there to be sent).
#[napi(js_name = "tensorJsonAsync")]
pub fn tensor_json_async(env: &Env, values: TypedArray<'_>) -> Result<AsyncTask<TensorJson>, Thrown> {
    (|| {
        let owned = with_values(&values, |e| match e {
            Elements::F32(v) => Values::F32(v.to_vec()),
            Elements::U16(v) => Values::F16Bits(v.to_vec()),
            _ => unreachable!("with_values passes only these"),
        })?;
        Ok(AsyncTask::new(TensorJson(owned)))
    })()
    .map_err(thrown(env))
}

/// A request's JSON header with its inputs' number arrays taken out.
#[napi(object)]
pub struct TakenInputData {
    /// The header's bytes, each array taken out written as the string marker + its index.
    pub header: Buffer,
    pub arrays: Vec<Float64Array>,
}

/// The first `length` bytes of `body` with the flat number arrays of `inputs[i].data` taken
/// out, or nothing when there are none or the text is left to `JSON.parse`.
#[napi(js_name = "takeInputData")]
pub fn take_input_data(body: Uint8Array, length: u32, marker: String) -> Option<TakenInputData> {
    let text = body.get(..length as usize)?;
    zgc_json::take_input_data(text, &marker).map(|d| TakenInputData {
        header: d.header.into(),
        arrays: d.arrays.into_iter().map(Float64Array::new).collect(),
    })
}
