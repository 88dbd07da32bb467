//! Where a mask read back from the GPU packer or transposer first differs from the CPU
//! packer's (`fragmask verify`, `fragmask bench packer`).

use fragmask_host::gpu_packer::{GpuPacked, GpuTransposed};
use fragmask_masks::{BlockLists, PackedMask, TransposedLists};

/// `None` if every list and every word of `gpu` equals the CPU packer's `cpu`; otherwise
/// where they first differ.
pub fn packed_difference(gpu: &GpuPacked, cpu: &PackedMask) -> Option<String> {
    lists_difference(&gpu.lists, cpu.lists())
        .or_else(|| first_difference("words", &gpu.words, cpu.words()))
        .or_else(|| first_difference("row_order", &gpu.row_order, &cpu.row_order()))
}

/// `None` if every list and word of `gpu` equals the CPU's `cpu`; otherwise where they
/// first differ.
pub fn transposed_difference(gpu: &GpuTransposed, cpu: &TransposedLists) -> Option<String> {
    lists_difference(&gpu.lists, cpu.lists())
        .or_else(|| first_difference("q_words", &gpu.words, cpu.words()))
        .or_else(|| first_difference("tile_order", &gpu.tile_order, &cpu.tile_order()))
}

/// Where one direction's lists first differ, named as their tensors are.
fn lists_difference(gpu: &BlockLists, cpu: &BlockLists) -> Option<String> {
    let names = cpu.direction().names();
    names
        .into_iter()
        .zip(gpu.parts().into_iter().zip(cpu.parts()))
        .find_map(|(name, (gpu, cpu))| first_difference(name, gpu, cpu))
}

/// Where `gpu` and `cpu` first differ (their lengths, else the first element).
fn first_difference<T: PartialEq + std::fmt::Debug>(
    name: &str,
    gpu: &[T],
    cpu: &[T],
) -> Option<String> {
    if gpu.len() != cpu.len() {
        return Some(format!(
            "{name}: {} entries on the GPU, {} on the CPU",
            gpu.len(),
            cpu.len()
        ));
    }
    let i = gpu.iter().zip(cpu).position(|(a, b)| a != b)?;
    Some(format!("{name}[{i}]: GPU {:?} CPU {:?}", gpu[i], cpu[i]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_difference_names_the_list_and_the_index() {
        assert_eq!(first_difference("x", &[1, 2, 3], &[1, 2, 3]), None);
        assert_eq!(
            first_difference("x", &[1, 5, 3], &[1, 2, 3]).as_deref(),
            Some("x[1]: GPU 5 CPU 2")
        );
        assert_eq!(
            first_difference("x", &[1], &[1, 2]).as_deref(),
            Some("x: 1 entries on the GPU, 2 on the CPU")
        );
    }

    #[test]
    fn a_lists_difference_names_the_directions_tensor() {
        use fragmask_masks::ListDirection;
        let lists = |direction, offsets: Vec<i32>| {
            BlockLists::new(
                direction,
                1,
                2,
                [vec![1], vec![1, 0], vec![0], vec![0, 0], offsets],
            )
            .unwrap()
        };
        for (direction, name) in [
            (ListDirection::Forward, "kv_tile_offsets"),
            (ListDirection::Transposed, "q_tile_offsets"),
        ] {
            let (a, b) = (lists(direction, vec![0, -1]), lists(direction, vec![1, -1]));
            assert_eq!(lists_difference(&a, &a), None);
            assert_eq!(
                lists_difference(&b, &a),
                Some(format!("{name}[0]: GPU 1 CPU 0"))
            );
        }
    }
}
