//! A command's answer in its frame: nothing for success, or an error as its code, message and
//! detail (`error::Detail`), written by the host and read by the parent. The one place that
//! knows where each part of an error goes.

use super::{CODE_MAX, F_CODE, F_CODE_LEN, F_ERR_STATUS, F_HAS_STATUS, F_MSG, F_MSG_LEN, F_OP_LEN, F_SRC_LEN, F_STATUS, MSG_MAX};
use crate::error::{Detail, Error, Result};
use crate::ffi::process::SharedRegion;
use std::sync::atomic::Ordering;

/// `text` cut to at most `max` bytes, at a character boundary.
fn cut(text: &str, max: usize) -> &[u8] {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text.as_bytes()[..end]
}

/// `name`, or nothing when it is longer than `room`.
fn fits(name: &Option<String>, room: usize) -> &str {
    name.as_deref().filter(|n| n.len() <= room).unwrap_or("")
}

/// Host side: writes `outcome` into the frame at `at`. The operation and source names go
/// after the message, in the same area; names that do not fit whole are left out, and the
/// message is cut to leave them room.
pub fn write(region: &SharedRegion, at: usize, outcome: &Result<()>) {
    let e = match outcome {
        Ok(()) => return region.word(at + F_STATUS).store(0, Ordering::Relaxed),
        Err(e) => e,
    };
    let detail = e.detail();
    let operation = fits(&detail.operation, MSG_MAX / 4);
    let source = fits(&detail.source, MSG_MAX / 2);
    let message = e.to_string();
    let message = cut(&message, MSG_MAX - operation.len() - source.len());
    let code = cut(e.code(), CODE_MAX);
    region.write(at + F_CODE, code);
    region.write(at + F_MSG, message);
    region.write(at + F_MSG + message.len(), operation.as_bytes());
    region.write(at + F_MSG + message.len() + operation.len(), source.as_bytes());
    region.word(at + F_CODE_LEN).store(code.len() as u32, Ordering::Relaxed);
    region.word(at + F_MSG_LEN).store(message.len() as u32, Ordering::Relaxed);
    region.word(at + F_OP_LEN).store(operation.len() as u32, Ordering::Relaxed);
    region.word(at + F_SRC_LEN).store(source.len() as u32, Ordering::Relaxed);
    region.word(at + F_HAS_STATUS).store(detail.status.is_some() as u32, Ordering::Relaxed);
    region.word(at + F_ERR_STATUS).store(detail.status.unwrap_or(0) as u32, Ordering::Relaxed);
    region.word(at + F_STATUS).store(1, Ordering::Relaxed);
}

/// Parent side: the answer in the frame at `at`, once its command is done. Lengths are
/// clamped to the area, so a host that wrote nonsense yields text, never an overrun.
pub fn read(region: &SharedRegion, at: usize) -> Result<()> {
    if region.word(at + F_STATUS).load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    let len = |word: usize, max: usize| (region.word(at + word).load(Ordering::Relaxed) as usize).min(max);
    let code_len = len(F_CODE_LEN, CODE_MAX);
    let msg_len = len(F_MSG_LEN, MSG_MAX);
    let op_len = len(F_OP_LEN, MSG_MAX - msg_len);
    let src_len = len(F_SRC_LEN, MSG_MAX - msg_len - op_len);
    let text = |from: usize, n: usize| {
        let mut bytes = vec![0u8; n];
        region.read(at + from, &mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    };
    let named = |from: usize, n: usize| (n > 0).then(|| text(from, n));
    let detail = Detail {
        status: (region.word(at + F_HAS_STATUS).load(Ordering::Relaxed) == 1).then(|| region.word(at + F_ERR_STATUS).load(Ordering::Relaxed) as i32),
        operation: named(F_MSG + msg_len, op_len),
        source: named(F_MSG + msg_len + op_len, src_len),
    };
    Err(Error::Remote { code: Error::known_code(&text(F_CODE, code_len)), message: text(F_MSG, msg_len), detail })
}
