//! Strided layouts: where each logical element of a tensor lives in its physical storage
//! (`offset + sum(c[a] * strides[a])`), and the packing loop that scatters logical C-order
//! values into that storage.

/// Strides, in elements, of a C-contiguous tensor of `shape`.
pub fn c_strides(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut stride: isize = 1;
    for axis in (0..shape.len()).rev() {
        strides[axis] = stride;
        stride = stride.saturating_mul(shape[axis] as isize);
    }
    strides
}

/// C-contiguous: the strides of every axis that has more than one position match `c_strides`
/// (an axis of extent 1 never moves, so its stride does not matter, as in numpy).
pub fn is_c_contiguous(shape: &[usize], strides: &[isize]) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let expected = c_strides(shape);
    shape
        .iter()
        .zip(strides.iter().zip(expected.iter()))
        .all(|(&d, (&s, &e))| d == 1 || s == e)
}

/// The lowest and highest physical index any logical element reaches, or `None` for a tensor
/// without elements. Computed in saturating i128 so that no descriptor can overflow it.
pub fn physical_range(shape: &[usize], strides: &[isize], offset: usize) -> Option<(i128, i128)> {
    if shape.contains(&0) {
        return None;
    }
    let mut low = offset as i128;
    let mut high = offset as i128;
    for (&d, &s) in shape.iter().zip(strides) {
        // Saturating: 64 axes of (2^64 - 1) * 2^63 would overflow even i128; a saturated
        // end is out of range for any element_count, which is what it should be.
        let reach = (d as i128 - 1).saturating_mul(s as i128);
        if reach < 0 {
            low = low.saturating_add(reach);
        } else {
            high = high.saturating_add(reach);
        }
    }
    Some((low, high))
}

/// Walks the logical elements in C order, calling `visit(logical_run, physical_start)` for each
/// run of the innermost axis. The layout must have been validated by `meta`.
fn for_each_row(shape: &[usize], strides: &[isize], offset: usize, mut visit: impl FnMut(usize, isize)) {
    if shape.contains(&0) {
        return;
    }
    let Some((&inner, outer)) = shape.split_last() else {
        visit(0, offset as isize);
        return;
    };
    let rows: usize = outer.iter().product();
    let mut coord = vec![0usize; outer.len()];
    let mut base = offset as isize;
    for row in 0..rows {
        visit(row * inner, base);
        for axis in (0..outer.len()).rev() {
            coord[axis] += 1;
            base += strides[axis];
            if coord[axis] < outer[axis] {
                break;
            }
            base -= strides[axis] * outer[axis] as isize;
            coord[axis] = 0;
        }
    }
}

/// Scatters `logical` (C order, `product(shape)` values) into `physical` (`element_count`
/// values). Elements of `physical` that no logical element maps to are left as they are.
pub fn pack<T: Copy>(shape: &[usize], strides: &[isize], offset: usize, logical: &[T], physical: &mut [T]) {
    // No elements: and the other extents may be as large as usize allows, too large to multiply.
    if shape.contains(&0) {
        return;
    }
    let inner = shape.last().copied().unwrap_or(1);
    let step = strides.last().copied().unwrap_or(1);
    // Tiles write in another order than C order, which only a layout that maps no two
    // logical elements to one physical element (no broadcast, no overlap) cannot tell apart.
    if shape.len() >= 2 && step != 1 && step != -1 && is_one_to_one(shape, strides) {
        return pack_tiled(shape, strides, offset, logical, physical);
    }
    for_each_row(shape, strides, offset, |start, base| {
        let row = &logical[start..start + inner];
        if step == 1 {
            let base = base as usize;
            physical[base..base + inner].copy_from_slice(row);
        } else {
            let mut at = base;
            for &value in row {
                physical[at as usize] = value;
                at += step;
            }
        }
    });
}

/// Whether distinct logical elements always land on distinct physical ones: with the axes
/// ordered by |stride|, each stride must step past everything the smaller axes reach.
/// Sufficient, not necessary; layouts it cannot vouch for are packed in C order.
pub fn is_one_to_one(shape: &[usize], strides: &[isize]) -> bool {
    let mut axes: Vec<(u128, u128)> = shape
        .iter()
        .zip(strides)
        .filter(|(&d, _)| d > 1)
        .map(|(&d, &s)| (s.unsigned_abs() as u128, d as u128))
        .collect();
    axes.sort_unstable();
    let mut reach: u128 = 0;
    for (stride, extent) in axes {
        if stride <= reach {
            return false;
        }
        reach = reach.saturating_add((extent - 1).saturating_mul(stride));
    }
    true
}

/// Side of the square tiles `pack_tiled` walks.
const TILE: usize = 64;

/// `pack` for layouts whose innermost axis is not contiguous (transposed, strided): a
/// row-by-row scatter touches a new cache line, often a new page, at every element, so the
/// two innermost axes are walked in TILE x TILE tiles that reuse the lines they touch.
fn pack_tiled<T: Copy>(shape: &[usize], strides: &[isize], offset: usize, logical: &[T], physical: &mut [T]) {
    let r = shape.len();
    let (rows, cols) = (shape[r - 2], shape[r - 1]);
    let (row_step, col_step) = (strides[r - 2], strides[r - 1]);
    let plane = rows * cols;
    if plane == 0 {
        return;
    }
    // One (rows x cols) plane per combination of the outer axes.
    let outer_shape = &shape[..r - 2];
    let outer_strides = &strides[..r - 2];
    let planes: usize = outer_shape.iter().product();
    let mut coord = vec![0usize; outer_shape.len()];
    let mut base = offset as isize;
    for p in 0..planes {
        let src = &logical[p * plane..(p + 1) * plane];
        for i0 in (0..rows).step_by(TILE) {
            for j0 in (0..cols).step_by(TILE) {
                for i in i0..(i0 + TILE).min(rows) {
                    let row = &src[i * cols..(i + 1) * cols];
                    let mut at = base + i as isize * row_step + j0 as isize * col_step;
                    for &value in &row[j0..(j0 + TILE).min(cols)] {
                        physical[at as usize] = value;
                        at += col_step;
                    }
                }
            }
        }
        for axis in (0..outer_shape.len()).rev() {
            coord[axis] += 1;
            base += outer_strides[axis];
            if coord[axis] < outer_shape[axis] {
                break;
            }
            base -= outer_strides[axis] * outer_shape[axis] as isize;
            coord[axis] = 0;
        }
    }
}

/// Gathers the logical values (C order) out of physical storage: the inverse of `pack`.
pub fn unpack<T: Copy>(shape: &[usize], strides: &[isize], offset: usize, physical: &[T], logical: &mut [T]) {
    let inner = shape.last().copied().unwrap_or(1);
    let step = strides.last().copied().unwrap_or(1);
    for_each_row(shape, strides, offset, |start, base| {
        let row = &mut logical[start..start + inner];
        let mut at = base;
        for slot in row {
            *slot = physical[at as usize];
            at += step;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Independent reference: the physical index of every logical element by the formula.
    fn indices(shape: &[usize], strides: &[isize], offset: usize) -> Vec<usize> {
        let count: usize = shape.iter().product();
        (0..count)
            .map(|linear| {
                let mut rest = linear;
                let mut at = offset as isize;
                for axis in (0..shape.len()).rev() {
                    at += (rest % shape[axis]) as isize * strides[axis];
                    rest /= shape[axis];
                }
                at as usize
            })
            .collect()
    }

    fn check(shape: &[usize], strides: &[isize], offset: usize, count: usize) {
        let logical: Vec<u32> = (0..shape.iter().product::<usize>() as u32).map(|v| v + 100).collect();
        let mut physical = vec![0u32; count];
        pack(shape, strides, offset, &logical, &mut physical);
        let mut expected = vec![0u32; count];
        for (value, at) in logical.iter().zip(indices(shape, strides, offset)) {
            expected[at] = *value;
        }
        // assert! rather than assert_eq!: a failure must not print megabytes of elements.
        assert!(physical == expected, "pack: shape {shape:?} strides {strides:?} offset {offset}");
        let mut back = vec![0u32; logical.len()];
        unpack(shape, strides, offset, &physical, &mut back);
        assert!(back == logical, "unpack: shape {shape:?} strides {strides:?} offset {offset}");
    }

    #[test]
    fn pack_matches_the_index_formula_for_many_layouts() {
        check(&[], &[], 0, 1);
        check(&[], &[], 3, 5);
        check(&[5], &[1], 0, 5);
        check(&[5], &[-1], 4, 5);
        check(&[5], &[3], 2, 15);
        check(&[2, 3], &[3, 1], 0, 6);
        check(&[2, 3], &[1, 2], 0, 6); // transposed
        check(&[3, 4], &[6, 1], 1, 20); // padded rows
        check(&[3, 4], &[-4, -1], 11, 12); // both axes reversed
        check(&[2, 3, 4], &[1, 8, 2], 0, 24); // permuted
        check(&[2, 1, 3], &[3, 99, 1], 0, 6);
        check(&[2, 0, 3], &[3, 3, 1], 0, 0);
        // Tiled paths: transposed and padded planes larger than a tile, with outer axes.
        check(&[70, 45], &[1, 72], 0, 72 * 45);
        check(&[3, 40, 33], &[41 * 33, 1, 41], 5, 3 * 41 * 33 + 5);
        check(&[33, 65], &[-1, -40], 40 * 64 + 32, 40 * 65);
        check(&[2, 2, 3, 2], &[12, 6, 1, 3], 0, 24);
        // Rank 5: three outer axes around the tiled plane, one of them reversed, so the
        // walk over the planes carries from axis to axis.
        check(&[2, 3, 2, 4, 5], &[120, 40, 20, 1, 4], 0, 240);
        check(&[2, 3, 2, 4, 5], &[120, -40, 20, 1, 4], 80, 240);
    }

    #[test]
    fn overlapping_layouts_pack_in_c_order_last_write_wins() {
        // Broadcast (stride 0) and overlapping strides: the value written last in C order
        // stays, as in the Python reference's element loop.
        for (shape, strides, count) in [(vec![3usize, 4], vec![0isize, 3], 10usize), (vec![40, 33], vec![1, 35], 40 + 35 * 32)] {
            assert!(!is_one_to_one(&shape, &strides));
            let n: usize = shape.iter().product();
            let logical: Vec<u32> = (0..n as u32).collect();
            let mut physical = vec![u32::MAX; count];
            pack(&shape, &strides, 0, &logical, &mut physical);
            let mut expected = vec![u32::MAX; count];
            for (value, at) in logical.iter().zip(indices(&shape, &strides, 0)) {
                expected[at] = *value;
            }
            assert!(physical == expected, "shape {shape:?} strides {strides:?}");
        }
        assert!(is_one_to_one(&[1024, 1024], &[1, 1040]));
        assert!(is_one_to_one(&[2, 3], &[-3, -1]));
        // An axis of extent 1 reaches no second element, whatever its stride.
        assert!(is_one_to_one(&[1, 3, 4], &[0, 1, 3]));
        assert!(is_one_to_one(&[3, 1], &[1, 0]));
    }

    #[test]
    fn physical_range_covers_negative_and_positive_reach() {
        assert_eq!(physical_range(&[3, 4], &[-4, 1], 8), Some((0, 11)));
        assert_eq!(physical_range(&[], &[], 2), Some((2, 2)));
        assert_eq!(physical_range(&[0, 4], &[4, 1], 0), None);
    }

    #[test]
    fn contiguity_ignores_unit_axes() {
        assert!(is_c_contiguous(&[2, 1, 3], &[3, 7, 1]));
        assert!(!is_c_contiguous(&[2, 3], &[1, 2]));
        assert_eq!(c_strides(&[2, 3, 4]), vec![12, 4, 1]);
    }
}
