//! The host child of an isolated instance: loads one artifact (the same validation as
//! in-process), reports its signature, maps the region the parent sends (`isolate`), then
//! serves commands through the run protocol until the parent goes.

use crate::abi::DType;
use crate::error::{Error, Result};
use crate::isolate::*;
use crate::dtype::{Elements, ElementsMut};
use crate::engine::Engine;
use crate::instance::Instance;
use crate::run::{Input, Outputs, Run};
use crate::ffi::memory::{elements, elements_mut};
use crate::ffi::process::{self, Channel, RegionSlot, SharedRegion};
use crate::Artifact;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How long the child watches for the next command before it sleeps on the socket.
const SPIN: Duration = Duration::from_micros(50);

/// `zgc-runtime-host PARENT_PID ARTIFACT`: the entry of the host binary. Returns its exit code.
pub fn main(args: &[String]) -> i32 {
    let (Some(parent), Some(path)) = (args.get(1).and_then(|p| p.parse::<u32>().ok()), args.get(2)) else {
        eprintln!("usage: zgc-runtime-host PARENT_PID ARTIFACT (started by zgc-runtime for isolate: 'process')");
        return 64;
    };
    if let Err(e) = process::become_host_child(parent) {
        eprintln!("zgc-runtime-host: cannot tie itself to its parent: {e}");
        return 71;
    }
    let channel = match Channel::from_stdin() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("zgc-runtime-host: no control socket on stdin: {e}");
            return 72;
        }
    };
    let loaded = Artifact::open(path).and_then(|a| {
        let a = Arc::new(a);
        Instance::new(a.clone()).map(|i| (a, i))
    });
    let mut hello = Writer::default();
    let (artifact, instance) = match loaded {
        Ok(pair) => {
            hello.u32(1);
            hello.signature(pair.0.description());
            pair
        }
        Err(e) => {
            hello.u32(0);
            hello.str(e.code());
            hello.str(&e.to_string());
            let _ = send_framed(&channel, &hello.0);
            return 0;
        }
    };
    if send_framed(&channel, &hello.0).is_err() {
        return 73;
    }
    // The region's size and frame count, with its descriptor.
    let mut handoff = [0u8; 12];
    let region = match channel.recv_exact(&mut handoff) {
        Ok(Some(fd)) => SharedRegion::map(fd, u64::from_le_bytes(handoff[..8].try_into().expect("8 bytes")) as usize),
        _ => return 74,
    };
    let Ok(region) = region else { return 75 };
    let frames = u32::from_le_bytes(handoff[8..].try_into().expect("4 bytes")) as usize;
    if !(1..=MAX_FRAMES).contains(&frames) {
        return 76;
    }
    let layout = match Layout::of(artifact.description(), frames, process::page_size()) {
        Ok(l) if l.len == region.len() => l,
        _ => return 76,
    };
    Host { region: Arc::new(region), layout, artifact, engine: Engine::Local(instance), channel }.serve();
    0
}

fn send_framed(channel: &Channel, payload: &[u8]) -> std::io::Result<()> {
    let mut framed = (payload.len() as u64).to_le_bytes().to_vec();
    framed.extend_from_slice(payload);
    channel.send(&framed, None)
}

struct Host {
    region: Arc<SharedRegion>,
    layout: Layout,
    artifact: Arc<Artifact>,
    engine: Engine,
    channel: Channel,
}

impl Host {
    fn serve(mut self) {
        let mut done = self.region.word(DONE).load(Ordering::Acquire);
        loop {
            let req = self.region.word(REQ);
            if !process::spin_until(|| req.load(Ordering::Acquire) != done, SPIN) {
                // Asleep until a byte comes; EOF means the parent is gone. The flag is set
                // before REQ is looked at again, so a command sent meanwhile sends a byte.
                let sleeps = self.region.word(CHILD_SLEEPS);
                sleeps.store(1, Ordering::SeqCst);
                handshake();
                if req.load(Ordering::SeqCst) == done {
                    let mut bytes = [0u8; 64];
                    if let Ok((0, _)) | Err(_) = self.channel.recv(&mut bytes) {
                        return;
                    }
                }
                sleeps.store(0, Ordering::SeqCst);
                continue;
            }
            // Commands in order, each in its frame, back to back while more are waiting.
            let seq = done.wrapping_add(1);
            let frame = self.layout.frame_index(seq);
            let at = self.layout.frames[frame].at;
            // Taken, unless the parent took it back first (then it is skipped, and counted done).
            if self.region.word(at + F_STATE).compare_exchange(STATE_READY, STATE_TAKEN, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                let outcome = self.execute(frame, self.region.word(at + F_CMD).load(Ordering::Acquire), self.region.word(at + F_ARG).load(Ordering::Acquire));
                self.answer(at, outcome);
            } else {
                self.take_marks(frame);
            }
            self.region.word(DONE).store(seq, Ordering::SeqCst);
            handshake();
            done = seq;
            if self.region.word(PARENT_SLEEPS).load(Ordering::SeqCst) == 1 && self.channel.send(&[1], None).is_err() {
                return;
            }
        }
    }

    fn answer(&self, at: usize, outcome: Result<()>) {
        crate::isolate::answer::write(&self.region, at, &outcome);
    }

    fn execute(&mut self, frame: usize, cmd: u32, arg: u32) -> Result<()> {
        match cmd {
            RUN | SET => {
                let artifact = self.artifact.clone();
                let marks = self.take_marks(frame);
                let frame = &self.layout.frames[frame];
                let mut run = Run::owned(&mut self.engine);
                apply_marks(&self.region, frame, &artifact, &marks, &mut run)?;
                if cmd == SET {
                    return Ok(());
                }
                write_outputs(&self.region, frame, &artifact, run.run()?)
            }
            STORAGE => {
                let index = arg as usize;
                let artifact = self.artifact.clone();
                let source = artifact.sources.get(index).ok_or(Error::Value { name: format!("#{index}"), detail: "no such source".into() })?;
                let (at, len) = self.layout.storage[index];
                let slot = RegionSlot::new(self.region.clone(), at, len);
                self.engine.local().expect("a host's instance is its own").bind(index, crate::dtype::storage_kind(source.tensor.dtype), Box::new(slot))
            }
            other => Err(Error::Value { name: "command".into(), detail: format!("unknown command {other}") }),
        }
    }

    /// Which inputs the parent wrote into `frame`, and how (values or storage); the marks are
    /// cleared, whatever the command then makes of them.
    fn take_marks(&self, frame: usize) -> Vec<u32> {
        let frame = &self.layout.frames[frame];
        (0..self.artifact.sources.len()).map(|index| self.region.word(frame.mark(index)).swap(MARK_NONE, Ordering::AcqRel)).collect()
    }
}

/// Hands `run` every input the parent marked in `frame`: values, or physical storage to copy.
fn apply_marks(region: &SharedRegion, frame: &Frame, artifact: &Artifact, marks: &[u32], run: &mut Run<'_>) -> Result<()> {
    for (index, source) in artifact.sources.iter().enumerate() {
        let kind = marks[index];
        if kind == MARK_NONE {
            continue;
        }
        let t = &source.tensor;
        let (at, _) = frame.inputs[index];
        let bytes = if kind == MARK_STORAGE { t.physical_bytes() } else { t.byte_count };
        let slot: &[u8] = region.slot_mut(at, bytes);
        let values = match t.dtype {
            DType::F32 => elements::<f32>(slot).map(Elements::F32),
            DType::F16 => elements::<u16>(slot).map(Elements::U16),
            DType::I8 => elements::<i8>(slot).map(Elements::I8),
            DType::Bool => Some(Elements::U8(slot)),
        }
        .expect("slots are aligned to 64 bytes");
        run.input(index, if kind == MARK_STORAGE { Input::StorageCopy(values) } else { Input::Values(values) })?;
    }
    Ok(())
}

/// Copies each output of the run into its slot of `frame`.
fn write_outputs(region: &SharedRegion, frame: &Frame, artifact: &Artifact, mut outputs: Outputs<'_>) -> Result<()> {
    for (index, info) in artifact.outputs.iter().enumerate() {
        let (at, len) = frame.outputs[index];
        let slot = region.slot_mut(at, len);
        let target = match info.dtype {
            DType::F32 => elements_mut::<f32>(slot).map(ElementsMut::F32),
            DType::F16 => elements_mut::<u16>(slot).map(ElementsMut::U16),
            DType::I8 => elements_mut::<i8>(slot).map(ElementsMut::I8),
            DType::Bool => Some(ElementsMut::U8(slot)),
        }
        .expect("slots are aligned to 64 bytes");
        outputs.copy(index, target)?;
    }
    Ok(())
}
