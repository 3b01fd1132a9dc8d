//! A loaded and validated artifact: its library plus the checked description of its storage,
//! sources and outputs. Instances (`instance.rs`) share one through an `Arc`.

use crate::error::{Error, Result};
use crate::meta::{self, SourceInfo, TensorInfo, MAX_OUTPUTS, MAX_SOURCES};
use crate::ffi::library::ArtifactLibrary;
use std::collections::HashMap;
use std::ops::Deref;
use std::sync::Arc;

/// What an artifact is, checked once: its path, fingerprint, storage, sources and outputs. An
/// artifact loaded here holds one; an isolated instance's host process sends its own to the
/// parent (`isolate`), which then needs no library to check values and size the region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Description {
    pub path: String,
    pub fingerprint: u64,
    pub runtime_size: usize,
    pub runtime_alignment: usize,
    pub mutable_bytes: usize,
    pub sources: Vec<SourceInfo>,
    pub outputs: Vec<TensorInfo>,
}

pub struct Artifact {
    pub(crate) library: Arc<ArtifactLibrary>,
    description: Arc<Description>,
    by_name: HashMap<String, usize>,
}

/// An artifact reads as its description (`artifact.sources`, `artifact.outputs`, ...).
impl Deref for Artifact {
    type Target = Description;

    fn deref(&self) -> &Description {
        &self.description
    }
}

impl Artifact {
    pub fn open(path: &str) -> Result<Artifact> {
        Artifact::validate(ArtifactLibrary::open(path)?)
    }

    pub fn from_bytes(bytes: &[u8], label: &str) -> Result<Artifact> {
        Artifact::validate(ArtifactLibrary::from_bytes(bytes, label)?)
    }

    fn validate(library: ArtifactLibrary) -> Result<Artifact> {
        let path = library.path.clone();
        let runtime_size = library.runtime_size();
        let runtime_alignment = library.runtime_alignment();
        meta::validate_storage(&path, runtime_size, runtime_alignment)?;

        let source_count = library.source_count();
        meta::validate_count(&path, "source count", source_count, MAX_SOURCES)?;
        let raw_sources = (0..source_count).map(|i| library.source_descriptor(i)).collect::<Result<Vec<_>>>()?;
        let sources = meta::validate_sources(&path, &raw_sources)?;

        let output_count = library.output_count();
        meta::validate_count(&path, "output count", output_count, MAX_OUTPUTS)?;
        let raw_outputs = (0..output_count).map(|i| library.output_descriptor(i)).collect::<Result<Vec<_>>>()?;
        let outputs = meta::validate_outputs(&path, &raw_outputs)?;

        let by_name = sources.iter().map(|s| (s.name.clone(), s.index)).collect();
        Ok(Artifact {
            description: Arc::new(Description {
                path,
                fingerprint: library.fingerprint(),
                mutable_bytes: library.mutable_bytes(),
                runtime_size,
                runtime_alignment,
                sources,
                outputs,
            }),
            by_name,
            library: Arc::new(library),
        })
    }

    pub fn description(&self) -> &Description {
        &self.description
    }

    /// A share of its description, for callers that hold it beside the instance.
    pub fn shared_description(&self) -> Arc<Description> {
        self.description.clone()
    }

    pub fn path(&self) -> &str {
        &self.description.path
    }

    pub fn source_index(&self, name: &str) -> Result<usize> {
        self.by_name.get(name).copied().ok_or_else(|| Error::UnknownSource {
            name: name.to_owned(),
            known: self.sources.iter().map(|s| format!("{:?}", s.name)).collect::<Vec<_>>().join(", "),
        })
    }
}
