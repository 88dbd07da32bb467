//! The forward's operand tiles: Q, K and V as the family's shared-memory operand
//! component ([`OperandTile`], `family::smem`), and the offsets the forward reads off them
//! (docs/architecture.md, "The attention kernel family", shared memory).
//!
//! TMA writes each tile as chunks of 64 bf16 columns of D (one 128-byte swizzle row):
//! - Q (`block_m x D`) and K (`block_n x D`) are the K-major operands of `S = Q K^T`:
//!   `SmemAtom<K, SW128, 16>` tiled over `(rows, D)` with atoms along the rows first
//!   (CuTe `tile_to_shape`), so one chunk holds every row of 64 columns;
//! - V (`block_n x D`, D contiguous) is the MN-major B operand of `O = P V` (N = D,
//!   K = keys): `SmemAtom<MN, SW128, 16>` tiled over `(D, keys)` with atoms along the keys
//!   first, the same bytes as K's chunks.

use super::{ConfigError, Geometry};
use crate::family::smem::OperandTile;

/// The three operand tiles of one kernel.
#[derive(Debug, Clone)]
pub(super) struct Operands {
    pub q: OperandTile,
    pub k: OperandTile,
    pub v: OperandTile,
}

impl Operands {
    /// Q: `block_m x head_dim`, K-major; K: `step_n x head_dim`, K-major (the B operand of
    /// `Q K^T`, N = the step's keys); V: `(head_dim, step_n)` MN-major (the B operand of
    /// `P V`, N = D, K = the step's keys).
    pub fn new(g: &Geometry, head_dim: u32) -> Result<Self, ConfigError> {
        Ok(Operands {
            q: OperandTile::k_major("Q", g.block_m(), head_dim, 64)?,
            k: OperandTile::k_major("K", g.step_n(), head_dim, g.step_n())?,
            v: OperandTile::mn_major("V", head_dim, g.step_n(), head_dim)?,
        })
    }

    /// Byte offset of warpgroup `wg`'s 64 query rows in the Q tile: `bytes(64 wg, 0)`,
    /// checked linear in `wg` so the kernel can compute it as `wg * stride`.
    pub fn q_warpgroup_stride(&self, g: &Geometry) -> Result<u32, ConfigError> {
        let stride = self.q.bytes(64, 0)?;
        for wg in 0..g.consumer_warpgroups() {
            if self.q.bytes(64 * wg, 0)? != wg * stride {
                return Err(ConfigError::Layout(format!(
                    "Q rows of warpgroup {wg} are not {stride} bytes apart"
                )));
            }
        }
        Ok(stride)
    }

    /// Byte offset of slot `h`'s key block in every chunk of a step's K and V tiles:
    /// `K(h * block_n, 0)`, checked equal to `V(0, h * block_n)`.
    pub fn slot_bytes(&self, g: &Geometry, h: u32) -> Result<u32, ConfigError> {
        if h >= g.step_blocks() {
            return Err(ConfigError::Layout(format!(
                "slot {h} of a step of {} key block(s)",
                g.step_blocks()
            )));
        }
        let k = self.k.bytes(h * g.block_n(), 0)?;
        let v = self.v.bytes(0, h * g.block_n())?;
        if k != v {
            return Err(ConfigError::Layout(format!(
                "key block {h} starts at byte {k} of K but {v} of V"
            )));
        }
        Ok(k)
    }

    /// Bytes of one 64-column chunk (one TMA box) of the Q tile and of a K/V tile: the
    /// rows of a tile times one 128-byte swizzle row, checked against the layouts where the
    /// tile has a second chunk (`bytes(0, 64)` of Q and K, `bytes(64, 0)` of V).
    pub fn chunk_bytes(&self) -> Result<(u32, u32), ConfigError> {
        let q = self.q.extent().0 * 128;
        let kv = self.k.extent().0 * 128;
        if self.q.extent().1 > 64 {
            let found = [
                self.q.bytes(0, 64)?,
                self.k.bytes(0, 64)?,
                self.v.bytes(64, 0)?,
            ];
            if found != [q, kv, kv] {
                return Err(ConfigError::Layout(format!(
                    "64-column chunks of Q, K, V at bytes {found:?}, expected [{q}, {kv}, {kv}]"
                )));
            }
        }
        Ok((q, kv))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_are_the_hand_checked_sw128_fields() {
        // The 128x128 kernel ran with LBO 16 / SBO 1024 for Q and K, and LBO = one
        // 16 KiB chunk / SBO 1024 for V, before the descriptors came from the layouts.
        let ops = Operands::new(&Geometry::TILE_128X128, 128).unwrap();
        assert_eq!(ops.q.descriptor().leading_byte_offset, 16);
        assert_eq!(ops.q.descriptor().stride_byte_offset, 1024);
        assert_eq!(ops.k.descriptor().stride_byte_offset, 1024);
        assert_eq!(ops.v.descriptor().leading_byte_offset, 128 * 128);
        assert_eq!(ops.v.descriptor().stride_byte_offset, 1024);
        let offsets: Vec<u32> = (0..8).map(|j| ops.k.k_step_bytes(j).unwrap()).collect();
        assert_eq!(offsets, [0, 32, 64, 96, 16384, 16416, 16448, 16480]);
        let v: Vec<u32> = (0..8).map(|j| ops.v.k_step_bytes(j).unwrap()).collect();
        assert_eq!(v, [0, 2048, 4096, 6144, 8192, 10240, 12288, 14336]);
        assert_eq!(
            ops.q_warpgroup_stride(&Geometry::TILE_128X128).unwrap(),
            8192
        );
        assert_eq!(ops.chunk_bytes().unwrap(), (16384, 16384));
    }

    #[test]
    fn every_geometry_and_head_dim_has_canonical_operands() {
        for g in Geometry::SUPPORTED {
            for d in [64, 128, 256] {
                let ops = Operands::new(&g, d).unwrap();
                let (q_chunk, kv_chunk) = ops.chunk_bytes().unwrap();
                assert_eq!(q_chunk, g.block_m() * 128, "{g} d{d}");
                assert_eq!(kv_chunk, g.step_n() * 128, "{g} d{d}");
                if g.step_blocks() > 1 {
                    assert_eq!(
                        ops.slot_bytes(&g, 1).unwrap(),
                        g.block_n() * 128,
                        "{g} d{d}"
                    );
                }
                assert_eq!(ops.q.tile_bytes(), g.q_tile_bytes(d));
                assert_eq!(ops.v.tile_bytes(), g.kv_tile_bytes(d));
                // LBO of V is one chunk when D spans more than one (unused otherwise).
                if d > 64 {
                    assert_eq!(ops.v.descriptor().leading_byte_offset, kv_chunk, "{g} d{d}");
                }
            }
        }
    }
}
