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
fn fits_in(name: &Option<String>, room: usize) -> &str {
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
    let operation = fits_in(&detail.operation, MSG_MAX / 4);
    let source = fits_in(&detail.source, MSG_MAX / 2);
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
        fault: None,
    };
    Err(Error::Remote { code: Error::known_code(&text(F_CODE, code_len)), message: text(F_MSG, msg_len), detail })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region() -> SharedRegion {
        SharedRegion::create("zgc-answer-test", 4096).unwrap()
    }

    fn round_trip(e: Error) -> Error {
        let region = region();
        write(&region, 0, &Err(e));
        read(&region, 0).unwrap_err()
    }

    #[test]
    fn success_is_success_again_after_an_error() {
        let region = region();
        write(&region, 0, &Err(Error::Closed));
        assert!(read(&region, 0).is_err());
        write(&region, 0, &Ok(()));
        assert_eq!(read(&region, 0), Ok(()));
    }

    #[test]
    fn an_error_comes_back_with_its_code_message_and_detail() {
        let e = crate::error::check_source(5, "zgc_runtime_bind_source", "buf").unwrap_err();
        let back = round_trip(e.clone());
        assert_eq!((back.code(), back.to_string(), back.detail()), (e.code(), e.to_string(), e.detail()));
        // A status of -3 (no name) crosses as the same integer; no source, none comes back.
        let e = crate::error::check(-3, "zgc_runtime_run", String::new).unwrap_err();
        assert_eq!(round_trip(e.clone()).detail(), Detail { status: Some(-3), operation: Some("zgc_runtime_run".into()), source: None, fault: None });
        assert_eq!(round_trip(Error::Closed).detail(), Detail::default());
    }

    #[test]
    fn a_long_message_is_cut_at_a_character_and_leaves_room_for_the_names() {
        // The message is `source "s": ` (12 bytes) then two-byte characters; the room left by
        // the source's name is MSG_MAX - 1, an odd number of bytes after those 12 (MSG_MAX is
        // even), so the cut falls inside a character and steps back one byte.
        assert_eq!(MSG_MAX % 2, 0);
        let e = Error::Value { name: "s".into(), detail: "é".repeat(MSG_MAX) };
        let back = round_trip(e.clone());
        let message = back.to_string();
        assert_eq!(message.len(), MSG_MAX - 2);
        assert!(e.to_string().starts_with(&message));
        assert_eq!(back.detail().source.as_deref(), Some("s"));
        // Both names take room: the message is cut shorter by the operation's length too.
        let status = Error::Status { operation: "zgc_runtime_bind_source", status: 5, context: "x".repeat(MSG_MAX), source_name: Some("s".into()) };
        let back = round_trip(status);
        assert_eq!(back.to_string().len(), MSG_MAX - "zgc_runtime_bind_source".len() - 1);
        assert_eq!(back.detail().operation.as_deref(), Some("zgc_runtime_bind_source"));
    }

    #[test]
    fn names_longer_than_their_room_are_left_out_whole() {
        let long = "n".repeat(MSG_MAX / 2 + 1);
        let back = round_trip(Error::Size { name: long, expected: "1".into(), given: "2".into() });
        assert_eq!(back.detail().source, None);
        let fits = "n".repeat(MSG_MAX / 2);
        assert_eq!(round_trip(Error::Embedded { name: fits.clone() }).detail().source, Some(fits));
        // An operation name has a quarter of the area.
        let op = "o".repeat(MSG_MAX / 4);
        let leaked: &'static str = Box::leak(op.clone().into_boxed_str());
        let back = round_trip(Error::Status { operation: leaked, status: 1, context: String::new(), source_name: None });
        assert_eq!(back.detail().operation, Some(op));
        let leaked: &'static str = Box::leak("o".repeat(MSG_MAX / 4 + 1).into_boxed_str());
        let back = round_trip(Error::Status { operation: leaked, status: 1, context: String::new(), source_name: None });
        assert_eq!(back.detail().operation, None);
        assert_eq!(fits_in(&Some("abc".into()), 3), "abc");
        assert_eq!(fits_in(&Some("abcd".into()), 3), "");
        assert_eq!(fits_in(&None, 3), "");
    }

    #[test]
    fn lengths_a_host_wrote_wrong_are_clamped_to_the_area() {
        let region = region();
        write(&region, 0, &Err(crate::error::check_source(5, "zgc_runtime_bind_source", "buf").unwrap_err()));
        for word in [F_CODE_LEN, F_MSG_LEN, F_OP_LEN, F_SRC_LEN] {
            region.word(word).store(u32::MAX, Ordering::Relaxed);
        }
        let back = read(&region, 0).unwrap_err();
        // The message takes the whole area; the names, read after it, get no room at all.
        assert_eq!(back.to_string().len(), MSG_MAX);
        assert_eq!((back.detail().operation, back.detail().source), (None, None));
        // A message that leaves room: the operation then the source, each clamped to what is left.
        region.word(F_MSG_LEN).store(10, Ordering::Relaxed);
        let back = read(&region, 0).unwrap_err();
        assert_eq!(back.to_string().len(), 10);
        assert_eq!(back.detail().operation.map(|o| o.len()), Some(MSG_MAX - 10));
        assert_eq!(back.detail().source, None);
        region.word(F_OP_LEN).store(4, Ordering::Relaxed);
        assert_eq!(read(&region, 0).unwrap_err().detail().source.map(|s| s.len()), Some(MSG_MAX - 14));
    }

    #[test]
    fn cut_stops_at_a_character_boundary() {
        assert_eq!(cut("aé", 2), b"a");
        assert_eq!(cut("aé", 3), "aé".as_bytes());
        assert_eq!(cut("abc", 10), b"abc");
        assert_eq!(cut("ééé", 5), "éé".as_bytes());
    }
}
