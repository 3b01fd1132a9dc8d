//! Property tests of descriptor validation: arbitrary (mostly near-valid) descriptors go
//! through `meta`, which must never panic, and must accept exactly what an independent oracle
//! written from the ABI text accepts. Accepted BOUND layouts are then packed and unpacked by
//! `layout` (bounds-checked indexing: an out-of-range access would panic the test).
//! Failing cases are kept by proptest in `descriptors.proptest-regressions`; `CORPUS` holds
//! hand-picked edge cases that run first, every time.

use proptest::prelude::*;
use zgc_runtime_core::abi::{SourceFields, TensorFields};
use zgc_runtime_core::{layout, meta};

const ITEM: [usize; 5] = [0, 4, 2, 1, 1]; // by raw dtype; 0 = unknown
/// Largest logical count the oracle enumerates element by element.
const ENUMERABLE: u128 = 4096;

/// The ABI's rules, checked the slow, obvious way. `None`: too big to enumerate.
fn oracle(raw: &TensorFields, contiguous: bool) -> Option<bool> {
    let Some(&item) = ITEM.get(raw.dtype as usize).filter(|&&i| i != 0) else { return Some(false) };
    if raw.shape.len() != raw.strides.len() || raw.shape.len() > 64 {
        return Some(false);
    }
    let mut count: u128 = 1;
    for &d in &raw.shape {
        count = count.saturating_mul(d as u128);
    }
    let limit = isize::MAX as u128;
    if count > usize::MAX as u128 || count * item as u128 > limit || count * item as u128 != raw.logical_byte_count as u128 {
        return Some(false);
    }
    if raw.element_count as u128 * item as u128 > limit {
        return Some(false);
    }
    if contiguous && (raw.offset_elements != 0 || raw.element_count as u128 != count) {
        return Some(false);
    }
    if count > ENUMERABLE {
        return None;
    }
    // Every logical element, in C order: where it lives, and where C order would put it.
    let rank = raw.shape.len();
    let mut index = vec![0usize; rank];
    for linear in 0..count as usize {
        let mut physical = raw.offset_elements as i128;
        for a in 0..rank {
            physical += index[a] as i128 * raw.strides[a] as i128;
        }
        if physical < 0 || physical >= raw.element_count as i128 {
            return Some(false);
        }
        if contiguous && physical != linear as i128 {
            return Some(false);
        }
        for a in (0..rank).rev() {
            index[a] += 1;
            if index[a] < raw.shape[a] {
                break;
            }
            index[a] = 0;
        }
    }
    Some(true)
}

fn c_strides(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut s: isize = 1;
    for a in (0..shape.len()).rev() {
        strides[a] = s;
        s = s.wrapping_mul(shape[a] as isize);
    }
    strides
}

/// Descriptors near the valid ones, with every field sometimes corrupted.
fn tensor() -> impl Strategy<Value = TensorFields> {
    let dim = prop_oneof![8 => 0usize..6, 1 => Just(usize::MAX / 2), 1 => Just(1usize << 40), 1 => any::<usize>()];
    let shape = prop_oneof![10 => prop::collection::vec(dim.clone(), 0..5), 1 => prop::collection::vec(dim, 60..70)];
    let dtype = prop_oneof![9 => 1u32..5, 1 => 0u32..8];
    (shape, dtype, any::<u16>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(shape, dtype, mode, a, b, c)| {
        let item = ITEM.get(dtype as usize).copied().filter(|&i| i != 0).unwrap_or(4);
        let count = shape.iter().fold(1usize, |acc, &d| acc.wrapping_mul(d));
        let rank = shape.len();
        // Strides: C order, a swap of two axes, flipped axes, scaled (padded), or noise.
        let mut strides = c_strides(&shape);
        match mode % 8 {
            4 if rank > 1 => strides.swap((a as usize) % rank, (b as usize) % rank),
            5 => strides.iter_mut().enumerate().for_each(|(i, s)| if (c >> (i % 64)) & 1 == 1 { *s = s.wrapping_neg() }),
            6 => strides.iter_mut().for_each(|s| *s = s.wrapping_mul(1 + (a % 3) as isize)),
            _ => {}
        }
        if (mode >> 3) & 7 == 0 && rank > 0 {
            strides[(c as usize) % rank] = (b as i64 % 13 - 6) as isize;
        }
        if (mode >> 6) & 15 == 0 {
            strides.pop(); // a rank mismatch
        }
        let (low, high) = layout::physical_range(&shape, &strides, 0).unwrap_or((0, -1));
        let offset = if (mode >> 10) & 1 == 1 {
            (low.saturating_neg().max(0) as usize).wrapping_add((a % 3) as usize)
        } else if a % 4 == 0 {
            a as usize % 50
        } else {
            0
        };
        let reach = (high.saturating_sub(low).saturating_add(1).max(0) as usize).wrapping_add(offset);
        let element_count = match b % 8 {
            0..=2 => count,
            3 | 4 => reach,
            5 => reach.wrapping_sub(1),
            6 => reach.wrapping_add((c % 4) as usize),
            _ => c as usize,
        };
        let logical_byte_count = match c % 7 {
            0 => a as usize,
            1 => count.wrapping_mul(item).wrapping_add(1),
            _ => count.wrapping_mul(item),
        };
        TensorFields { dtype, element_count, logical_byte_count, offset_elements: offset, shape, strides }
    })
}

fn check_tensor(raw: &TensorFields, contiguous: bool) -> Result<(), TestCaseError> {
    let result = meta::validate_tensor("prop.so", "source \"t\"", raw, contiguous);
    if let Some(expected) = oracle(raw, contiguous) {
        prop_assert_eq!(result.is_ok(), expected, "validate {:?} -> {:?}", raw, result);
    }
    if let Err(e) = &result {
        prop_assert!(e.to_string().contains("source \"t\""), "the message names the tensor: {}", e);
    }
    if let Ok(info) = result {
        prop_assert_eq!(info.logical_count * info.dtype.item_size(), raw.logical_byte_count);
        if info.logical_count as u128 <= ENUMERABLE && info.element_count <= 1 << 20 {
            // Pack distinct values, read them back: every logical element must come back
            // unless two share a physical element (a broadcast layout), where the last wins.
            let logical: Vec<u32> = (1..=info.logical_count as u32).collect();
            let mut physical = vec![0u32; info.element_count];
            layout::pack(&info.shape, &info.strides, info.offset, &logical, &mut physical);
            let mut back = vec![0u32; info.logical_count];
            layout::unpack(&info.shape, &info.strides, info.offset, &physical, &mut back);
            if layout::is_one_to_one(&info.shape, &info.strides) {
                prop_assert_eq!(back, logical);
            }
        }
    }
    Ok(())
}

fn source() -> impl Strategy<Value = SourceFields> {
    let name = prop_oneof![
        6 => prop::sample::select(vec!["x", "w", "b", "state", "ü"]).prop_map(|s| Some(s.as_bytes().to_vec())),
        1 => Just(None),
        1 => Just(Some(vec![0xff, 0xfe])),
        1 => prop::collection::vec(any::<u8>(), 0..4).prop_map(Some),
    ];
    (name, 0u32..4, 0u32..6, 0u32..5, tensor()).prop_map(|(name, key, kind, binding, tensor)| SourceFields { key, name, kind, binding, tensor })
}

fn source_oracle(raws: &[SourceFields]) -> Option<bool> {
    let mut names = std::collections::HashSet::new();
    let mut keys = std::collections::HashSet::new();
    for raw in raws {
        let Some(name) = raw.name.as_ref().and_then(|n| String::from_utf8(n.clone()).ok()) else { return Some(false) };
        if !(1..=4).contains(&raw.kind) || !(1..=3).contains(&raw.binding) {
            return Some(false);
        }
        match oracle(&raw.tensor, raw.binding == 1) {
            Some(true) => {}
            other => return other,
        }
        if !names.insert(name) || !keys.insert(raw.key) {
            return Some(false);
        }
    }
    Some(true)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]

    #[test]
    fn tensors_are_accepted_exactly_when_the_abi_allows(raw in tensor(), contiguous in any::<bool>()) {
        check_tensor(&raw, contiguous)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 5_000, ..ProptestConfig::default() })]

    #[test]
    fn source_tables_are_accepted_exactly_when_the_abi_allows(raws in prop::collection::vec(source(), 0..5)) {
        let result = meta::validate_sources("prop.so", &raws);
        if let Some(expected) = source_oracle(&raws) {
            prop_assert_eq!(result.is_ok(), expected, "{:?} -> {:?}", raws, result);
        }
        if let Ok(infos) = result {
            prop_assert_eq!(infos.len(), raws.len());
        }
    }

    #[test]
    fn storage_requests_need_a_power_of_two_alignment(size in any::<usize>(), shift in 0u32..64, noise in any::<usize>()) {
        let alignment = if noise % 3 == 0 { noise } else { 1usize << shift };
        let ok = meta::validate_storage("prop.so", size, alignment).is_ok();
        if ok {
            prop_assert!(alignment.is_power_of_two());
            prop_assert!(size.checked_add(alignment).is_some_and(|s| s <= isize::MAX as usize));
        }
    }
}

/// Edge cases worth running every time: (shape, strides, offset, element_count, contiguous, valid).
const CORPUS: &[(&[usize], &[isize], usize, usize, bool, bool)] = &[
    (&[], &[], 0, 1, true, true),                       // rank 0
    (&[], &[], 3, 4, false, true),                      // rank 0 bound at an offset
    (&[], &[], 4, 4, false, false),                     // ... one past the end
    (&[0, 5], &[5, 1], 0, 0, true, true),               // no elements
    (&[2, 3], &[1, 2], 0, 6, false, true),              // transposed
    (&[2, 3], &[1, 2], 0, 6, true, false),              // transposed is not contiguous
    (&[2, 3], &[4, 1], 0, 7, false, true),              // row padding, last row short
    (&[2, 3], &[4, 1], 0, 6, false, false),             // ... one element short
    (&[3], &[-1], 2, 3, false, true),                   // reversed
    (&[3], &[-1], 1, 3, false, false),                  // reversed, reaches -1
    (&[1, 4], &[999, 1], 0, 4, true, true),             // extent-1 axis: its stride is free
    (&[4], &[0], 0, 1, false, true),                    // broadcast
    (&[usize::MAX, 2], &[2, 1], 0, 0, false, false),    // product overflows
];

#[test]
fn corpus_of_edge_cases() {
    for &(shape, strides, offset, element_count, contiguous, valid) in CORPUS {
        let count: usize = shape.iter().fold(1usize, |a, &d| a.wrapping_mul(d));
        let raw = TensorFields {
            dtype: 1,
            element_count,
            logical_byte_count: count.wrapping_mul(4),
            offset_elements: offset,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
        };
        let got = meta::validate_tensor("corpus.so", "source \"t\"", &raw, contiguous).is_ok();
        assert_eq!(got, valid, "{shape:?} {strides:?} offset {offset} count {element_count} contiguous {contiguous}");
        assert_eq!(oracle(&raw, contiguous), Some(valid), "the oracle agrees on {shape:?} {strides:?}");
    }
}

/// The generator is worth its cases only if it lands on both sides of every rule: count the
/// verdicts over 20,000 samples (printed with `--nocapture`, recorded in the README).
#[test]
fn the_generator_reaches_both_verdicts() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = tensor();
    let (mut accepted, mut rejected, mut enumerated) = ([0u32; 2], [0u32; 2], 0u32);
    for i in 0..20_000 {
        let raw = strategy.new_tree(&mut runner).unwrap().current();
        let contiguous = i % 2 == 0;
        if oracle(&raw, contiguous).is_some() {
            enumerated += 1;
        }
        match meta::validate_tensor("gen.so", "t", &raw, contiguous) {
            Ok(_) => accepted[contiguous as usize] += 1,
            Err(_) => rejected[contiguous as usize] += 1,
        }
    }
    println!("descriptor samples: bound accepted {} rejected {}, contiguous accepted {} rejected {}, {enumerated} checked element by element", accepted[0], rejected[0], accepted[1], rejected[1]);
    for side in 0..2 {
        assert!(accepted[side] >= 1_000 && rejected[side] >= 1_000, "accepted {accepted:?} rejected {rejected:?}");
    }
}
