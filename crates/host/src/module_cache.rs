//! The one loaded-module cache of every kernel family: each module is loaded into a
//! CUDA context once per process, however many runners, plans or kernel objects use it.
//!
//! - Key ([`ModuleKey`]): the context ([`ContextId`]: the device ordinal and the
//!   driver's context handle) and a SHA-256 [`ContentDigest`] of what determines the
//!   module: its image ([`ContentDigest::of_image`]), the source and compile options it
//!   is compiled from ([`ContentDigest::of_source`]), or a kernel family's variant
//!   ([`ContentDigest::of_variant`], for the plan paths that look their kernels up per
//!   call and must not regenerate a source to do it). Every field is tagged and
//!   length-prefixed, so the three kinds and different splits of the same bytes cannot
//!   collide.
//! - Value ([`LoadedModule`]): the module and its kernels, resolved and configured
//!   (shared-memory limits, cluster sizes) once when it is loaded.
//! - Concurrency ([`ModuleCache`]): the map's lock is held only to find or add a key's
//!   slot; a miss compiles and loads under that key's own lock, so other keys proceed
//!   and two callers of one key load it once. A hit takes no lock past the map's. A
//!   failed load leaves the slot empty and the next call tries again.
//! - Lifetime: entries live for the process and are never evicted. A module is a few
//!   hundred KiB of device memory and a process uses tens of variants; each cached
//!   module holds its context (`CudaModule` keeps an `Arc<CudaContext>`), so a context
//!   handle in a key cannot be reused by another context while the entry exists.
//!
//! Below this layer sits the on-disk NVRTC cache ([`crate::cache`]), which keeps compiled
//! images across processes (docs/architecture.md, "The runtime and the checking code
//! beside it").

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use cudarc::driver::{sys, CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx as CudarcImage;
use sha2::{Digest as _, Sha256};

use crate::device::Device;
use crate::error::Error;
use crate::nvrtc::{CompileOptions, Compiler};

/// The CUDA context a module is loaded into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ContextId {
    ordinal: usize,
    handle: usize,
}

impl ContextId {
    /// The identity of `context`: its device ordinal and driver handle (a device's
    /// primary context has one handle however many `CudaContext`s retain it).
    pub fn of(context: &CudaContext) -> Self {
        Self {
            ordinal: context.ordinal(),
            handle: context.cu_ctx() as usize,
        }
    }

    /// An identity from its parts (tests of the cache without a GPU).
    #[cfg(test)]
    pub(crate) const fn from_parts(ordinal: usize, handle: usize) -> Self {
        Self { ordinal, handle }
    }
}

/// SHA-256 of what determines a module's content (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ContentDigest([u8; 32]);

/// Feeds one length-prefixed field into `hasher`.
fn field(hasher: &mut Sha256, bytes: &[u8]) {
    hasher.update((bytes.len() as u64).to_le_bytes());
    hasher.update(bytes);
}

/// A [`Hasher`] that streams what a `Hash` implementation writes into SHA-256.
struct Sha256Sink(Sha256);

impl Hasher for Sha256Sink {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        u64::from_le_bytes(first)
    }
}

impl ContentDigest {
    /// The digest of a compiled image (a cubin's bytes).
    pub fn of_image(image: &[u8]) -> Self {
        let mut h = Sha256::new();
        field(&mut h, b"image");
        field(&mut h, image);
        Self(h.finalize().into())
    }

    /// The digest of `source` compiled to a cubin under `options` (the NVRTC arguments
    /// and the source are the whole input of the compilation).
    pub fn of_source(source: &str, options: &CompileOptions) -> Self {
        let mut h = Sha256::new();
        field(&mut h, b"source");
        let args = options.to_args(true);
        field(&mut h, &(args.len() as u64).to_le_bytes());
        for arg in &args {
            field(&mut h, arg.as_bytes());
        }
        field(&mut h, source.as_bytes());
        Self(h.finalize().into())
    }

    /// The digest of `family`'s kernel `variant`: its type and everything its `Hash`
    /// writes. Valid only within one process (this cache's lifetime), where one binary
    /// generates one source per variant; the context fixes the architecture.
    pub fn of_variant<V: Hash + ?Sized>(family: &str, variant: &V) -> Self {
        let mut h = Sha256::new();
        field(&mut h, b"variant");
        field(&mut h, family.as_bytes());
        field(&mut h, std::any::type_name::<V>().as_bytes());
        let mut sink = Sha256Sink(h);
        variant.hash(&mut sink);
        Self(sink.0.finalize().into())
    }
}

/// A cache key: one content in one context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ModuleKey {
    /// The context the module is loaded into.
    pub context: ContextId,
    /// What the module holds.
    pub content: ContentDigest,
}

/// One key's slot: its value once loaded, and the lock a loading caller holds.
type Slot<V> = Arc<(OnceLock<V>, Mutex<()>)>;

/// A thread-safe get-or-load map from [`ModuleKey`] to `V`, generic so that its
/// semantics are testable without a GPU (the process's instance holds
/// [`LoadedModule`]s).
pub struct ModuleCache<V> {
    slots: Mutex<HashMap<ModuleKey, Slot<V>>>,
}

impl<V> Default for ModuleCache<V> {
    fn default() -> Self {
        Self {
            slots: Mutex::new(HashMap::new()),
        }
    }
}

impl<V: Clone> ModuleCache<V> {
    /// The value of `key`, calling `load` only when no earlier call loaded it. Holds
    /// only `key`'s own lock while `load` runs; an error is returned and not kept.
    pub fn get_or_load<E>(
        &self,
        key: ModuleKey,
        load: impl FnOnce() -> Result<V, E>,
    ) -> Result<V, E> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(slots.entry(key).or_default())
        };
        let (value, loading) = &*slot;
        if let Some(v) = value.get() {
            return Ok(v.clone());
        }
        let _loading = loading.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(v) = value.get() {
            return Ok(v.clone());
        }
        let v = load()?;
        Ok(value.get_or_init(|| v).clone())
    }

    /// How many keys hold a loaded value.
    pub fn loaded(&self) -> usize {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.values().filter(|s| s.0.get().is_some()).count()
    }
}

/// A module loaded into one context, with the kernels resolved when it was loaded.
#[derive(Clone, Debug)]
pub struct LoadedModule {
    module: Arc<CudaModule>,
    kernels: Arc<[(&'static str, CudaFunction)]>,
}

impl LoadedModule {
    /// The module.
    pub fn module(&self) -> &Arc<CudaModule> {
        &self.module
    }

    /// The kernel `name`: resolved at load, or looked up in the module.
    pub fn function(&self, name: &str) -> Result<CudaFunction, Error> {
        if let Some((_, f)) = self.kernels.iter().find(|(n, _)| *n == name) {
            return Ok(f.clone());
        }
        self.module
            .load_function(name)
            .map_err(Error::driver("looking up a kernel in its module"))
    }
}

impl LoadedModule {
    /// Lets kernel `name` use `bytes` of dynamic shared memory per block (above 48 KiB
    /// a kernel must opt in: CUDA Programming Guide, "Shared Memory",
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`).
    pub fn allow_dynamic_shared_memory(&self, name: &str, bytes: u32) -> Result<(), Error> {
        let bytes = i32::try_from(bytes).map_err(|_| {
            Error::InvalidArgument(format!("{bytes} bytes of dynamic shared memory"))
        })?;
        self.function(name)?
            .set_attribute(
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes,
            )
            .map_err(Error::driver(
                "raising a kernel's dynamic shared memory limit",
            ))
    }
}

/// The process's cache.
fn modules() -> &'static ModuleCache<LoadedModule> {
    static MODULES: OnceLock<ModuleCache<LoadedModule>> = OnceLock::new();
    MODULES.get_or_init(ModuleCache::default)
}

/// The module of `content` in `context`, loading it on first use: `image` gives the
/// cubin, `kernels` are resolved, then `configure` sets their attributes. What
/// `configure` sets must follow from `content` alone (every user of the key gets it).
pub fn load<E: From<Error>>(
    context: &Arc<CudaContext>,
    content: ContentDigest,
    kernels: &[&'static str],
    image: impl FnOnce() -> Result<Vec<u8>, E>,
    configure: impl FnOnce(&LoadedModule) -> Result<(), E>,
) -> Result<LoadedModule, E> {
    let key = ModuleKey {
        context: ContextId::of(context),
        content,
    };
    modules().get_or_load(key, || {
        let module = context
            .load_module(CudarcImage::from_binary(image()?))
            .map_err(Error::driver(
                "loading the cubin (is it for this GPU's architecture?)",
            ))?;
        let resolved = kernels
            .iter()
            .map(|&name| {
                module
                    .load_function(name)
                    .map(|f| (name, f))
                    .map_err(Error::driver("looking up a kernel in its module"))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let loaded = LoadedModule {
            module,
            kernels: resolved.into(),
        };
        configure(&loaded)?;
        Ok(loaded)
    })
}

/// The module compiled from `source` under `options` (through `compiler` and its
/// on-disk cache, only when this process has not loaded it into `context` yet).
pub fn compile_and_load(
    context: &Arc<CudaContext>,
    compiler: &Compiler,
    source: &str,
    options: &CompileOptions,
    kernels: &[&'static str],
    configure: impl FnOnce(&LoadedModule) -> Result<(), Error>,
) -> Result<LoadedModule, Error> {
    load(
        context,
        ContentDigest::of_source(source, options),
        kernels,
        || Ok(compiler.compile_cubin(source, options)?.bytes),
        configure,
    )
}

/// [`compile_and_load`] with `device`'s default options ([`CompileOptions::new`]) and
/// no attribute to set.
pub fn compile_for_device(
    device: &Device,
    compiler: &Compiler,
    source: &str,
    kernels: &[&'static str],
) -> Result<LoadedModule, Error> {
    compile_and_load(
        device.context(),
        compiler,
        source,
        &CompileOptions::new(device.arch()),
        kernels,
        |_| Ok(()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvrtc::Arch;

    const CONTEXT: ContextId = ContextId::from_parts(0, 0x1000);

    fn key(context: ContextId, image: &[u8]) -> ModuleKey {
        ModuleKey {
            context,
            content: ContentDigest::of_image(image),
        }
    }

    #[test]
    fn equal_images_in_one_context_have_equal_keys() {
        // Another buffer with the same bytes.
        let copy: Vec<u8> = "cubin".bytes().collect();
        assert_eq!(key(CONTEXT, b"cubin"), key(CONTEXT, &copy));
    }

    #[test]
    fn keys_differ_in_image_and_in_context() {
        let base = key(CONTEXT, b"cubin");
        assert_ne!(base, key(CONTEXT, b"cubiN"));
        assert_ne!(base, key(CONTEXT, b"cubin\0"));
        assert_ne!(base, key(ContextId::from_parts(1, 0x1000), b"cubin"));
        assert_ne!(base, key(ContextId::from_parts(0, 0x2000), b"cubin"));
    }

    #[test]
    fn source_digests_depend_on_source_and_options_only() {
        let opts = CompileOptions::new(Arch::from_compute_capability(9, 0));
        let digest = ContentDigest::of_source("__global__ void k() {}", &opts);
        assert_eq!(
            digest,
            ContentDigest::of_source("__global__ void k() {}", &opts.clone())
        );
        assert_ne!(
            digest,
            ContentDigest::of_source("__global__ void j() {}", &opts)
        );
        let mut extra = opts.clone();
        extra.extra.push("-lineinfo".into());
        assert_ne!(
            digest,
            ContentDigest::of_source("__global__ void k() {}", &extra)
        );
        let other_arch = CompileOptions::new(Arch::from_compute_capability(8, 0));
        assert_ne!(
            digest,
            ContentDigest::of_source("__global__ void k() {}", &other_arch)
        );
    }

    #[test]
    fn variant_digests_separate_values_families_and_kinds() {
        let digest = ContentDigest::of_variant("forward", &(128u32, true));
        assert_eq!(
            digest,
            ContentDigest::of_variant("forward", &(128u32, true))
        );
        assert_ne!(digest, ContentDigest::of_variant("forward", &(64u32, true)));
        assert_ne!(
            digest,
            ContentDigest::of_variant("backward", &(128u32, true))
        );
        assert_ne!(
            digest,
            ContentDigest::of_variant("forward", &(128u64, true))
        );
        // A source, an image and a variant with the same bytes are different contents.
        let opts = CompileOptions::new(Arch::from_compute_capability(9, 0));
        assert_ne!(
            ContentDigest::of_image(b"x"),
            ContentDigest::of_source("x", &opts)
        );
        assert_ne!(
            ContentDigest::of_image(b"x"),
            ContentDigest::of_variant("x", "")
        );
    }

    #[test]
    fn a_loaded_key_is_served_without_loading_again() {
        let cache = ModuleCache::<u32>::default();
        let mut calls = 0;
        let first = cache.get_or_load(key(CONTEXT, b"a"), || {
            calls += 1;
            Ok::<_, ()>(7)
        });
        let second = cache.get_or_load(key(CONTEXT, b"a"), || {
            calls += 1;
            Ok::<_, ()>(8)
        });
        assert_eq!((first, second, calls), (Ok(7), Ok(7), 1));
        assert_eq!(cache.loaded(), 1);
    }

    #[test]
    fn distinct_keys_load_distinct_values() {
        let cache = ModuleCache::<u32>::default();
        let a = cache.get_or_load(key(CONTEXT, b"a"), || Ok::<_, ()>(1));
        let b = cache.get_or_load(key(CONTEXT, b"b"), || Ok::<_, ()>(2));
        let other_context = cache.get_or_load(key(ContextId::from_parts(1, 0x1000), b"a"), || {
            Ok::<_, ()>(3)
        });
        assert_eq!((a, b, other_context), (Ok(1), Ok(2), Ok(3)));
        assert_eq!(cache.loaded(), 3);
    }

    #[test]
    fn a_failed_load_is_not_kept_and_the_next_call_loads() {
        let cache = ModuleCache::<u32>::default();
        let failed = cache.get_or_load(key(CONTEXT, b"a"), || Err("no driver"));
        assert_eq!(failed, Err("no driver"));
        assert_eq!(cache.loaded(), 0);
        let retried = cache.get_or_load(key(CONTEXT, b"a"), || Ok::<_, &str>(5));
        assert_eq!(retried, Ok(5));
        assert_eq!(cache.loaded(), 1);
    }

    #[test]
    fn concurrent_callers_of_one_key_load_it_once() {
        let cache = ModuleCache::<u32>::default();
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let values: Vec<Result<u32, ()>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let (cache, calls) = (&cache, &calls);
                    s.spawn(move || {
                        cache.get_or_load(key(CONTEXT, b"shared"), || {
                            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(5));
                            Ok(i)
                        })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(Err(())))
                .collect()
        });
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
        let first = values[0];
        assert!(first.is_ok());
        assert!(values.iter().all(|v| *v == first));
    }
}
