//! Launch parameters, refused up front where the device would hang instead of failing.

use super::PtoError;

/// Most AICPU scheduler threads; more hang the device.
pub const MAX_AICPU_THREADS: i32 = 4;
/// The device has 72 cores and a block takes three (1 AIC + 2 AIV).
pub const MAX_BLOCK_DIM: i32 = 72 / 3;

#[derive(Debug, Clone)]
pub struct LaunchParams {
    pub aicpu_thread_num: i32,
    pub block_dim: i32,
    pub device_id: i32,
    pub aicpu_binary: Vec<u8>,
    pub aicore_binary: Vec<u8>,
}

impl LaunchParams {
    /// Checks every rule of the spec against the library's device (`set_device`'s id).
    pub fn validate(&self, device: i32) -> Result<(), PtoError> {
        let bad = |detail: String| Err(PtoError::InvalidArgument { operation: "launch_runtime", detail });
        let (threads, blocks) = (self.aicpu_thread_num, self.block_dim);
        if !(1..=MAX_AICPU_THREADS).contains(&threads) {
            return bad(format!("aicpuThreadNum must be 1..{MAX_AICPU_THREADS}, got {threads} (other values hang the device)"));
        }
        if blocks < 1 {
            return bad(format!("blockDim must be at least 1, got {blocks} (hangs the device)"));
        }
        if blocks % threads != 0 {
            return bad(format!("blockDim ({blocks}) must be a multiple of aicpuThreadNum ({threads}) (otherwise the device hangs)"));
        }
        if blocks > MAX_BLOCK_DIM {
            return bad(format!("blockDim must be at most {MAX_BLOCK_DIM} (3 cores per block, 72 cores), got {blocks}"));
        }
        if self.aicpu_binary.is_empty() {
            return bad("aicpuBinary is empty".into());
        }
        if self.aicore_binary.is_empty() {
            return bad("aicoreBinary is empty".into());
        }
        if self.device_id != device {
            return Err(PtoError::Device { operation: "launch_runtime", set: device, asked: self.device_id });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(threads: i32, blocks: i32) -> LaunchParams {
        LaunchParams { aicpu_thread_num: threads, block_dim: blocks, device_id: 0, aicpu_binary: vec![1], aicore_binary: vec![2] }
    }

    #[test]
    fn accepts_exactly_the_parameters_that_neither_hang_nor_fail() {
        for threads in -2..8 {
            for blocks in -2..40 {
                let ok = (1..=4).contains(&threads) && blocks >= 1 && blocks % threads == 0 && blocks * 3 <= 72;
                assert_eq!(params(threads, blocks).validate(0).is_ok(), ok, "threads {threads} blocks {blocks}");
            }
        }
    }

    #[test]
    fn refuses_empty_binaries_and_a_device_other_than_the_library_s() {
        let mut p = params(1, 1);
        p.aicore_binary.clear();
        assert!(matches!(p.validate(0), Err(PtoError::InvalidArgument { detail, .. }) if detail.contains("aicoreBinary")));
        let p = params(1, 1);
        assert_eq!(p.validate(3), Err(PtoError::Device { operation: "launch_runtime", set: 3, asked: 0 }));
    }
}
