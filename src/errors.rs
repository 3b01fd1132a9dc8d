//! Errors as they cross to JavaScript: the stable code and the core's detail (`Code`), and
//! `thrown`, which sets the detail as properties of the thrown object.

use crate::js;
use zgc::dtype;
use zgc::meta::SourceInfo;
use crate::js::JsArray;
use zgc::error::Detail;
use zgc::Error;
use napi::Env;
use napi_derive::napi;

/// An error's stable code, which napi-rs puts in `err.code`, and the core's detail of it,
/// which `thrown` sets beside it.
pub struct Code(pub(crate) &'static str, pub(crate) Option<Box<Detail>>);
impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        self.0
    }
}

impl Code {
    pub(crate) fn of(code: &'static str) -> Code {
        Code(code, None)
    }
}

pub(crate) fn js_err(e: Error) -> napi::Error<Code> {
    let detail = Some(Box::new(e.detail())).filter(|d| **d != Detail::default());
    napi::Error::new(Code(e.code(), detail), e.to_string())
}

pub(crate) fn napi_err(e: napi::Error) -> napi::Error<Code> {
    napi::Error::new(Code::of("ERR_ZGC_NAPI"), e.reason.clone())
}

/// What every `#[napi]` function fails with: an error already thrown as a `ZgcError` with its
/// fields, or one napi-rs throws with its code and message. Only `thrown` makes one, and it
/// needs the `Env`, so no method can return an error that loses its fields.
pub struct Thrown(napi::Error<Code>);

impl From<Thrown> for napi::JsError<Code> {
    fn from(t: Thrown) -> Self {
        napi::JsError::from(t.0)
    }
}

/// At a method's return: an error with detail is thrown here, as an object with its
/// properties, and napi-rs, seeing the exception pending, throws nothing more. Others go on
/// to napi-rs, which makes them with their code and message.
pub(crate) fn thrown(env: &Env) -> impl Fn(napi::Error<Code>) -> Thrown + '_ {
    move |e| match &e.status.1 {
        None => Thrown(e),
        Some(detail) => {
            js::throw(env.raw(), js::with_detail(env.raw(), js::error_object(env.raw(), e.status.0, &e.reason), detail));
            Thrown(napi::Error::new(Code::of("PendingException"), e.reason))
        }
    }
}

/// Every `err.code` the package gives (`zgc::error::CODES`), for the JavaScript side and its
/// tests.
#[napi]
pub fn error_codes() -> Vec<String> {
    zgc::error::CODES.iter().map(|c| (*c).to_owned()).collect()
}

pub(crate) fn unsupported(source: &SourceInfo, array: &JsArray) -> Error {
    Error::DType {
        name: source.name.clone(),
        dtype: source.tensor.dtype.as_str(),
        expected: dtype::value_arrays(source.tensor.dtype).to_owned(),
        given: array.class_name().into_owned(),
    }
}

/// A JavaScript error for `e`, as thrown errors are (`code`, message and detail), for promises.
pub(crate) fn error_value(env: napi::sys::napi_env, e: &Error) -> napi::sys::napi_value {
    js::error_value(env, e)
}
