//! Where a mask read back from the GPU packer or transposer first differs from the CPU
//! packer's (`fragmask verify`, `fragmask bench packer`).

use fragmask_host::gpu_packer::{GpuPacked, GpuTransposed};
use fragmask_masks::{PackedMask, TransposedLists};

/// `None` if every list and every word of `gpu` equals the CPU packer's `cpu`; otherwise
/// where they first differ.
pub fn packed_difference(gpu: &GpuPacked, cpu: &PackedMask) -> Option<String> {
    let lists: [(&str, &[i32], &[i32]); 5] = [
        ("kv_num_blocks", &gpu.kv_num_blocks, cpu.kv_num_blocks()),
        ("kv_indices", &gpu.kv_indices, cpu.kv_indices()),
        (
            "full_kv_num_blocks",
            &gpu.full_kv_num_blocks,
            cpu.full_kv_num_blocks(),
        ),
        (
            "full_kv_indices",
            &gpu.full_kv_indices,
            cpu.full_kv_indices(),
        ),
        (
            "kv_tile_offsets",
            &gpu.kv_tile_offsets,
            cpu.kv_tile_offsets(),
        ),
    ];
    for (name, gpu, cpu) in lists {
        if let Some(d) = first_difference(name, gpu, cpu) {
            return Some(d);
        }
    }
    let cpu_words = cpu.words();
    if gpu.words.len() != cpu_words.len() {
        return Some(format!(
            "words: {} on the GPU, {} on the CPU",
            gpu.words.len(),
            cpu_words.len()
        ));
    }
    let i = gpu.words.iter().zip(cpu_words).position(|(a, b)| a != b)?;
    Some(format!(
        "words[{i}]: GPU {:#010x} CPU {:#010x}",
        gpu.words[i], cpu_words[i]
    ))
}

/// `None` if every list and word of `gpu` equals the CPU's `cpu`; otherwise where they
/// first differ.
pub fn transposed_difference(gpu: &GpuTransposed, cpu: &TransposedLists) -> Option<String> {
    let lists: [(&str, &[i32], &[i32]); 5] = [
        ("q_num_blocks", &gpu.q_num_blocks, cpu.q_num_blocks()),
        ("q_indices", &gpu.q_indices, cpu.q_indices()),
        (
            "full_q_num_blocks",
            &gpu.full_q_num_blocks,
            cpu.full_q_num_blocks(),
        ),
        ("full_q_indices", &gpu.full_q_indices, cpu.full_q_indices()),
        ("q_tile_offsets", &gpu.q_tile_offsets, cpu.q_tile_offsets()),
    ];
    for (name, gpu, cpu) in lists {
        if let Some(d) = first_difference(name, gpu, cpu) {
            return Some(d);
        }
    }
    first_difference("q_words", &gpu.q_words, cpu.q_words())
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
}
