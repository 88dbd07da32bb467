//! Thread-value layouts of NVIDIA MMA atoms (SM90 wgmma, SM80 mma.sync), built on
//! `fragmask-layout`. Filled in by the fragment-model issue.
#![no_std]
