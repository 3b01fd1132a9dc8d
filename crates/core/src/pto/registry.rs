//! The process-wide table of loaded PTO libraries. Unloading tears the device down, so a
//! library, once loaded, stays loaded (and its thread alive) until the process exits; the
//! same path loads once, from any thread or worker.

use super::{HostThread, PtoError};
use crate::ffi::pto::PtoLibrary;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub type Library = Arc<HostThread<PtoLibrary>>;

static BY_PATH: Mutex<Option<HashMap<String, Library>>> = Mutex::new(None);
static FROM_BYTES: Mutex<Vec<Library>> = Mutex::new(Vec::new());

/// The library at `path` (resolved, symlinks followed), loaded on first use.
pub fn load_path(path: &str) -> Result<Library, PtoError> {
    let resolved = std::fs::canonicalize(path)
        .map_err(|e| PtoError::Load { path: path.to_owned(), reason: e.to_string() })?
        .to_string_lossy()
        .into_owned();
    // Held while loading, so two threads loading one path get one library.
    let mut table = BY_PATH.lock().unwrap_or_else(|p| p.into_inner());
    let table = table.get_or_insert_with(HashMap::new);
    if let Some(library) = table.get(&resolved) {
        return Ok(library.clone());
    }
    let target = resolved.clone();
    let library = Arc::new(HostThread::spawn(resolved.clone(), move || super::library::open(&target))?);
    table.insert(resolved, library.clone());
    Ok(library)
}

/// A new copy of the library from its bytes (an anonymous memfd: no file left behind).
pub fn load_bytes(bytes: Vec<u8>) -> Result<Library, PtoError> {
    let library = Arc::new(HostThread::spawn("<bytes>".into(), move || super::library::from_bytes(&bytes))?);
    FROM_BYTES.lock().unwrap_or_else(|p| p.into_inner()).push(library.clone());
    Ok(library)
}
