//! Float tensors as JSON text for the server (`crate::json`): at once for small tensors, and
//! on a libuv pool thread for large ones, so that the event loop keeps answering meanwhile.

use super::Code;
use crate::dtype::Elements;
use crate::sys::js::JsArray;
use napi::bindgen_prelude::{AsyncTask, TypedArray};
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
        Elements::F32(v) => crate::json::write_f32(v, &mut out),
        Elements::U16(v) => crate::json::write_f16(v, &mut out),
        _ => unreachable!("with_values passes only f32 and u16"),
    }
    out
}

fn refused(given: &str) -> napi::Error<Code> {
    napi::Error::new(Code("ERR_ZGC_DTYPE"), format!("JSON tensor text takes a Float32Array (f32) or a Uint16Array (f16 bits), got {given}"))
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
pub fn tensor_json(values: TypedArray<'_>) -> napi::Result<String, Code> {
    with_values(&values, text)
}

pub struct TensorJson(Values);

impl Task for TensorJson {
    type Output = String;
    type JsValue = String;

    fn compute(&mut self) -> napi::Result<String> {
        Ok(self.0.json())
    }

    fn resolve(&mut self, _env: Env, output: String) -> napi::Result<String> {
        Ok(output)
    }
}

/// As `tensorJson`, on a libuv pool thread: the values are copied now, the text made there.
#[napi(js_name = "tensorJsonAsync")]
pub fn tensor_json_async(values: TypedArray<'_>) -> napi::Result<AsyncTask<TensorJson>, Code> {
    let owned = with_values(&values, |e| match e {
        Elements::F32(v) => Values::F32(v.to_vec()),
        Elements::U16(v) => Values::F16Bits(v.to_vec()),
        _ => unreachable!("with_values passes only these"),
    })?;
    Ok(AsyncTask::new(TensorJson(owned)))
}
