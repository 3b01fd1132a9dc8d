//! The napi-rs binding: a thin layer from JavaScript values to the core. The TypeScript-facing
//! API (`index.js`) wraps these classes; they are not meant to be used directly.

use crate::abi::{Binding, ABI_VERSION};
use crate::dtype::{self, Elements};
use crate::meta::TensorInfo;
use crate::sys::js::{self, JsRegion};
use crate::{Artifact, Error, Instance};
use napi::bindgen_prelude::TypedArray;
use napi::Env;
use napi_derive::napi;
use std::sync::Arc;

/// An error's stable code, which napi-rs puts in `err.code`.
pub struct Code(&'static str);
impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        self.0
    }
}

fn js_err(e: Error) -> napi::Error<Code> {
    napi::Error::new(Code(e.code()), e.to_string())
}

fn napi_err(e: napi::Error) -> napi::Error<Code> {
    napi::Error::new(Code("ERR_ZGC_NAPI"), e.reason.clone())
}

#[napi(object)]
pub struct SourceDescription {
    pub key: u32,
    pub name: String,
    pub kind: String,
    pub binding: String,
    pub dtype: String,
    pub shape: Vec<f64>,
    pub strides: Vec<f64>,
    pub offset: f64,
    pub element_count: f64,
    pub byte_count: f64,
    /// Logical elements (`product(shape)`), which `set` takes.
    pub logical_count: f64,
    /// Logical C order is the physical layout: values and storage coincide.
    pub identity: bool,
}

#[napi(object)]
pub struct OutputDescription {
    pub dtype: String,
    pub shape: Vec<f64>,
    pub element_count: f64,
    pub byte_count: f64,
}

#[napi(object)]
pub struct ArtifactDescription {
    pub path: String,
    pub abi_version: u32,
    pub fingerprint_hex: String,
    pub runtime_size: f64,
    pub runtime_alignment: f64,
    pub mutable_bytes: f64,
    pub sources: Vec<SourceDescription>,
    pub outputs: Vec<OutputDescription>,
}

fn shape(t: &TensorInfo) -> Vec<f64> {
    t.shape.iter().map(|&d| d as f64).collect()
}

#[napi]
pub struct NativeArtifact {
    inner: Arc<Artifact>,
}

#[napi]
impl NativeArtifact {
    #[napi(factory)]
    pub fn open(path: String) -> napi::Result<NativeArtifact, Code> {
        Artifact::open(&path).map(|a| NativeArtifact { inner: Arc::new(a) }).map_err(js_err)
    }

    #[napi(factory)]
    pub fn from_bytes(bytes: TypedArray<'_>, label: String) -> napi::Result<NativeArtifact, Code> {
        Artifact::from_bytes(&bytes.arraybuffer, &label).map(|a| NativeArtifact { inner: Arc::new(a) }).map_err(js_err)
    }

    #[napi]
    pub fn describe(&self) -> ArtifactDescription {
        let a = &self.inner;
        ArtifactDescription {
            path: a.path().to_owned(),
            abi_version: ABI_VERSION,
            fingerprint_hex: format!("{:#018x}", a.fingerprint),
            runtime_size: a.runtime_size as f64,
            runtime_alignment: a.runtime_alignment as f64,
            mutable_bytes: a.mutable_bytes as f64,
            sources: a
                .sources
                .iter()
                .map(|s| SourceDescription {
                    key: s.key,
                    name: s.name.clone(),
                    kind: s.kind.as_str().to_owned(),
                    binding: s.binding.as_str().to_owned(),
                    dtype: s.tensor.dtype.as_str().to_owned(),
                    shape: shape(&s.tensor),
                    strides: s.tensor.strides.iter().map(|&d| d as f64).collect(),
                    offset: s.tensor.offset as f64,
                    element_count: s.tensor.element_count as f64,
                    byte_count: s.tensor.byte_count as f64,
                    logical_count: s.tensor.logical_count as f64,
                    identity: s.tensor.is_identity(),
                })
                .collect(),
            outputs: a
                .outputs
                .iter()
                .map(|o| OutputDescription {
                    dtype: o.dtype.as_str().to_owned(),
                    shape: shape(o),
                    element_count: o.element_count as f64,
                    byte_count: o.byte_count as f64,
                })
                .collect(),
        }
    }

    #[napi]
    pub fn instantiate(&self) -> napi::Result<NativeRuntime, Code> {
        Instance::new(self.inner.clone()).map(|i| NativeRuntime { inner: Some(i) }).map_err(js_err)
    }
}

#[napi]
pub struct NativeRuntime {
    /// `None` once closed: dropping the instance deinitialises it.
    inner: Option<Instance>,
}

fn unsupported(index: usize, instance: &Instance, array: &TypedArray<'_>) -> Error {
    let source = &instance.artifact().sources[index];
    Error::DType {
        name: source.name.clone(),
        dtype: source.tensor.dtype.as_str(),
        expected: dtype::value_arrays(source.tensor.dtype).to_owned(),
        given: js::class_name(array).to_owned(),
    }
}

impl NativeRuntime {
    fn live(&mut self, index: u32) -> napi::Result<(&mut Instance, usize), Code> {
        let instance = self.inner.as_mut().ok_or_else(|| js_err(Error::Closed))?;
        let count = instance.artifact().sources.len();
        let index = index as usize;
        if index >= count {
            return Err(js_err(Error::UnknownSource { name: format!("#{index}"), known: format!("{count} sources") }));
        }
        Ok((instance, index))
    }

    fn set_view(instance: &mut Instance, index: usize, values: &TypedArray<'_>) -> Result<(), Error> {
        let view: Elements<'_> = js::view(values).ok_or_else(|| unsupported(index, instance, values))?;
        instance.set(index, view)
    }

    fn bind_array(env: &Env, instance: &mut Instance, index: usize, storage: &TypedArray<'_>) -> napi::Result<(), Code> {
        let source = &instance.artifact().sources[index];
        if let (crate::abi::DType::Bool, Some(Elements::U8(bytes))) = (source.tensor.dtype, js::view(storage)) {
            dtype::check_bool(&source.name, bytes).map_err(js_err)?;
        }
        let given = js::class_name(storage);
        let region = JsRegion::hold(env, storage).map_err(napi_err)?;
        match region {
            Some(region) => instance.bind(index, given, Box::new(region)).map_err(js_err),
            // Not a kind any dtype binds: let the core word the refusal.
            None => instance.bind(index, given, Box::new(crate::sys::memory::AlignedBuf::zeroed(0, 1).unwrap())).map_err(js_err),
        }
    }
}

#[napi]
impl NativeRuntime {
    /// Logical values for a source (copied, or packed into runtime-owned storage).
    #[napi]
    pub fn set(&mut self, index: u32, values: TypedArray<'_>) -> napi::Result<(), Code> {
        let (instance, index) = self.live(index)?;
        Self::set_view(instance, index, &values).map_err(js_err)
    }

    /// Zero-copy binding of physical storage; the array is held until rebound or closed.
    #[napi]
    pub fn bind(&mut self, env: Env, index: u32, storage: TypedArray<'_>) -> napi::Result<(), Code> {
        let (instance, index) = self.live(index)?;
        Self::bind_array(&env, instance, index, &storage)
    }

    /// A `run()` input: bound zero-copy when the array is the source's physical storage
    /// (identity layout, or exactly `elementCount` elements of a padded one), else as `set`.
    #[napi]
    pub fn feed(&mut self, env: Env, index: u32, values: TypedArray<'_>) -> napi::Result<(), Code> {
        let (instance, index) = self.live(index)?;
        let source = &instance.artifact().sources[index];
        let t = &source.tensor;
        if source.binding == Binding::Bound && js::class_name(&values) == dtype::storage_array(t.dtype) {
            let len = js::view(&values).map_or(0, |v| v.len());
            if len == t.element_count && (t.is_identity() || t.element_count != t.logical_count) {
                return Self::bind_array(&env, instance, index, &values);
            }
        }
        Self::set_view(instance, index, &values).map_err(js_err)
    }

    #[napi]
    pub fn run(&mut self) -> napi::Result<(), Code> {
        let instance = self.inner.as_mut().ok_or_else(|| js_err(Error::Closed))?;
        instance.run().map_err(js_err)
    }

    /// Copies output `index` of the last run into `target`.
    #[napi]
    pub fn copy_output(&mut self, index: u32, mut target: TypedArray<'_>) -> napi::Result<(), Code> {
        let instance = self.inner.as_mut().ok_or_else(|| js_err(Error::Closed))?;
        let given = js::class_name(&target);
        let Some(view) = js::view_mut(&mut target) else {
            let info = instance.artifact().outputs.get(index as usize);
            return Err(js_err(Error::DType {
                name: format!("output {index}"),
                dtype: info.map_or("?", |o| o.dtype.as_str()),
                expected: info.map_or("a TypedArray".into(), |o| format!("a {}", dtype::storage_array(o.dtype))),
                given: given.to_owned(),
            }));
        };
        instance.copy_output(index as usize, view).map_err(js_err)
    }

    /// Deinitialises the instance and releases everything bound to it. Idempotent.
    #[napi]
    pub fn close(&mut self) {
        self.inner = None;
    }

    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.inner.is_none()
    }
}
