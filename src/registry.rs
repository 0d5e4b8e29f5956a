//! Kernel registries that schedule workers may read concurrently.
//!
//! Both keep their contents as an immutable snapshot behind an `Arc`: a read clones the
//! `Arc` (a lock held for one reference-count increment) and then works lock-free on a value
//! no one will change; a write builds a new snapshot and swaps it in. Writers are serialized
//! by a lock of their own, so a slow writer never blocks readers and no write is lost.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use hashbrown::HashMap;

#[cfg(feature = "std")]
use crate::sync::thread;
use crate::sync::{Arc, AtomicBool, Mutex, Ordering};

/// An immutable value swapped atomically as a whole; the mechanism both registries share.
struct Snapshot<T> {
    current: Mutex<Arc<T>>,
    writer: Mutex<()>,
}

impl<T: Clone> Snapshot<T> {
    fn new(value: T) -> Self {
        Self {
            current: Mutex::new(Arc::new(value)),
            writer: Mutex::new(()),
        }
    }

    fn read(&self) -> Arc<T> {
        self.current.lock().clone()
    }

    /// Serialized copy-on-write: `edit` sees the latest snapshot and changes a private copy.
    fn update<R>(&self, edit: impl FnOnce(&mut T) -> R) -> R {
        let _serial = self.writer.lock();
        let mut next = T::clone(&self.read());
        let result = edit(&mut next);
        *self.current.lock() = Arc::new(next);
        result
    }
}

/// A kernel implementation that a [`KernelRegistry`] can choose between.
pub trait KernelProvider: Send + Sync {
    /// The provider's name, matched case-insensitively by [`KernelRegistry::find`].
    fn name(&self) -> &str;

    /// Higher runs first.
    fn priority(&self) -> i32;

    /// Whether it can run here (a CPU feature check, say).
    fn is_available(&self) -> bool {
        true
    }
}

/// Providers of one kind of kernel, highest priority first.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use std::sync::Arc;
/// use skainet_schedule::{KernelProvider, KernelRegistry};
/// struct P(&'static str, i32, bool);
/// impl KernelProvider for P {
///     fn name(&self) -> &str { self.0 }
///     fn priority(&self) -> i32 { self.1 }
///     fn is_available(&self) -> bool { self.2 }
/// }
/// let reg: KernelRegistry<P> = KernelRegistry::new();
/// reg.register(Arc::new(P("scalar", 0, true)));
/// reg.register(Arc::new(P("avx512", 20, false)));
/// reg.register(Arc::new(P("avx2", 10, true)));
/// assert_eq!(reg.best_available().unwrap().name(), "avx2");
/// assert_eq!(reg.find("AVX512").unwrap().priority(), 20);
/// # }
/// ```
pub struct KernelRegistry<P: ?Sized> {
    providers: Snapshot<Vec<Arc<P>>>,
}

impl<P: ?Sized + KernelProvider> KernelRegistry<P> {
    /// An empty registry.
    pub fn new() -> Self {
        Self {
            providers: Snapshot::new(Vec::new()),
        }
    }

    /// Adds `provider`; returns `false` (and changes nothing) if this very instance is already
    /// registered. Among equal priorities, earlier registrations come first.
    pub fn register(&self, provider: Arc<P>) -> bool {
        self.providers.update(|list| {
            if list.iter().any(|p| Arc::ptr_eq(p, &provider)) {
                return false;
            }
            let at = list.partition_point(|p| p.priority() >= provider.priority());
            list.insert(at, provider);
            true
        })
    }

    /// Every provider, highest priority first: an immutable snapshot.
    pub fn providers(&self) -> Arc<Vec<Arc<P>>> {
        self.providers.read()
    }

    /// The highest-priority provider whose name equals `name`, ignoring ASCII case.
    pub fn find(&self, name: &str) -> Option<Arc<P>> {
        self.providers
            .read()
            .iter()
            .find(|p| p.name().eq_ignore_ascii_case(name))
            .cloned()
    }

    /// The highest-priority provider that is available here.
    pub fn best_available(&self) -> Option<Arc<P>> {
        self.providers
            .read()
            .iter()
            .find(|p| p.is_available())
            .cloned()
    }

    /// How many providers are registered.
    pub fn len(&self) -> usize {
        self.providers.read().len()
    }

    /// Whether none is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<P: ?Sized + KernelProvider> Default for KernelRegistry<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: ?Sized + KernelProvider> fmt::Debug for KernelRegistry<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let snapshot = self.providers.read();
        f.debug_list()
            .entries(snapshot.iter().map(|p| (p.name(), p.priority())))
            .finish()
    }
}

/// Kernels by key; the most recent registration for a key wins.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use std::sync::Arc;
/// use skainet_schedule::KernelDispatch;
/// let dispatch: KernelDispatch<dyn Fn(f32) -> f32 + Send + Sync> = KernelDispatch::new();
/// dispatch.ensure_installed(|d| {
///     d.register("double", Arc::new(|x: f32| x * 2.0));
/// });
/// assert_eq!(dispatch.get("double").unwrap()(1.5), 3.0);
/// # }
/// ```
pub struct KernelDispatch<K: ?Sized> {
    kernels: Snapshot<HashMap<String, Arc<K>>>,
    installed: AtomicBool,
    install_lock: Mutex<()>,
    /// Who is running the installer right now, checked before `install_lock` is taken so that
    /// a re-entrant call panics instead of waiting on a lock its own thread holds.
    installer: Installer,
}

/// The thread running an installer: its id under `std`.
#[cfg(feature = "std")]
struct Installer(Mutex<Option<thread::ThreadId>>);

/// Without `std` the crate cannot tell threads apart: it only knows that an installer runs.
#[cfg(not(feature = "std"))]
struct Installer(AtomicBool);

impl Installer {
    fn new() -> Self {
        #[cfg(feature = "std")]
        {
            Self(Mutex::new(None))
        }
        #[cfg(not(feature = "std"))]
        {
            Self(AtomicBool::new(false))
        }
    }

    /// Panics if this call re-enters a running installer (see `ensure_installed`).
    fn check_not_reentrant(&self) {
        #[cfg(feature = "std")]
        let reentrant = *self.0.lock() == Some(thread::current().id());
        #[cfg(not(feature = "std"))]
        let reentrant = self.0.load(Ordering::Acquire);
        if reentrant {
            panic!("{REENTRANT_INSTALL}");
        }
    }

    /// Marks the calling thread as the installer until the guard drops (also on unwind).
    fn enter(&self) -> InstallerMark<'_> {
        #[cfg(feature = "std")]
        {
            *self.0.lock() = Some(thread::current().id());
        }
        #[cfg(not(feature = "std"))]
        {
            self.0.store(true, Ordering::Release);
        }
        InstallerMark(self)
    }
}

struct InstallerMark<'a>(&'a Installer);

impl Drop for InstallerMark<'_> {
    fn drop(&mut self) {
        #[cfg(feature = "std")]
        {
            *self.0 .0.lock() = None;
        }
        #[cfg(not(feature = "std"))]
        {
            self.0 .0.store(false, Ordering::Release);
        }
    }
}

/// The message of the panic a re-entrant [`KernelDispatch::ensure_installed`] raises.
const REENTRANT_INSTALL: &str = "KernelDispatch::ensure_installed was called from inside its own \
     installer; the installer must register kernels with `register`, not call ensure_installed";

impl<K: ?Sized + Send + Sync> KernelDispatch<K> {
    /// An empty dispatch table.
    pub fn new() -> Self {
        Self {
            kernels: Snapshot::new(HashMap::new()),
            installed: AtomicBool::new(false),
            install_lock: Mutex::new(()),
            installer: Installer::new(),
        }
    }

    /// Maps `key` to `kernel`, replacing (and returning) what the key had.
    pub fn register(&self, key: impl Into<String>, kernel: Arc<K>) -> Option<Arc<K>> {
        let key = key.into();
        self.kernels.update(|map| map.insert(key, kernel))
    }

    /// The kernel registered last under `key`.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.kernels.read().get(key).cloned()
    }

    /// Every key with its kernel: an immutable snapshot.
    pub fn snapshot(&self) -> Arc<HashMap<String, Arc<K>>> {
        self.kernels.read()
    }

    /// Runs `install` exactly once over the dispatch's lifetime, however many threads call
    /// this at once; every caller returns only after the installation has finished.
    ///
    /// If `install` panics, nothing counts as installed and the next call runs its installer.
    ///
    /// # Panics
    ///
    /// When called from inside `install` itself (re-entrantly, before the installation has
    /// finished), with a message saying so — waiting would never end. With `std`, only a call
    /// on the installing thread is re-entrant; calls from other threads wait as usual. Without
    /// `std` the crate cannot tell threads apart, so *any* call that arrives while an installer
    /// is running panics; install before sharing the dispatch between cores or interrupt
    /// handlers.
    ///
    /// ```
    /// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
    /// use std::panic::{catch_unwind, AssertUnwindSafe};
    /// use skainet_schedule::KernelDispatch;
    /// let dispatch: KernelDispatch<u32> = KernelDispatch::new();
    /// dispatch.ensure_installed(|d| {
    ///     let inner = catch_unwind(AssertUnwindSafe(|| d.ensure_installed(|_| {})));
    ///     assert!(inner.is_err());
    /// });
    /// assert!(dispatch.is_installed());
    /// # }
    /// ```
    pub fn ensure_installed(&self, install: impl FnOnce(&Self)) {
        // Acquire pairs with the Release below: seeing `true` means the installer's
        // registrations are visible.
        if self.installed.load(Ordering::Acquire) {
            return;
        }
        self.installer.check_not_reentrant();
        let _serial = self.install_lock.lock();
        if !self.installed.load(Ordering::Acquire) {
            let _mark = self.installer.enter();
            install(self);
            self.installed.store(true, Ordering::Release);
        }
    }

    /// Whether [`ensure_installed`](Self::ensure_installed) has run its installer.
    pub fn is_installed(&self) -> bool {
        self.installed.load(Ordering::Acquire)
    }
}

impl<K: ?Sized + Send + Sync> Default for KernelDispatch<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: ?Sized> fmt::Debug for KernelDispatch<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let snapshot = self.kernels.read();
        let mut keys: Vec<&String> = snapshot.keys().collect();
        keys.sort();
        f.debug_struct("KernelDispatch")
            .field("keys", &keys)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    // The no_std build's tests still link std: its unwinding is what they observe.
    #[cfg(not(feature = "std"))]
    extern crate std;
    use std::panic::{catch_unwind, AssertUnwindSafe};

    use super::*;

    struct P(&'static str, i32);
    impl KernelProvider for P {
        fn name(&self) -> &str {
            self.0
        }
        fn priority(&self) -> i32 {
            self.1
        }
    }

    #[test]
    fn same_instance_is_registered_once_and_ties_keep_order() {
        let reg = KernelRegistry::new();
        let a = Arc::new(P("a", 1));
        assert!(reg.register(a.clone()));
        assert!(!reg.register(a));
        assert!(reg.register(Arc::new(P("b", 1))));
        assert!(reg.register(Arc::new(P("c", 5))));
        let names: Vec<&str> = reg.providers().iter().map(|p| p.0).collect();
        assert_eq!(names, ["c", "a", "b"]);
    }

    #[test]
    fn latest_registration_wins() {
        let d: KernelDispatch<u32> = KernelDispatch::new();
        assert_eq!(d.register("k", Arc::new(1)), None);
        assert_eq!(d.register("k", Arc::new(2)).as_deref(), Some(&1));
        assert_eq!(d.get("k").as_deref(), Some(&2));
        assert_eq!(d.get("K"), None);
    }

    #[test]
    fn a_snapshot_does_not_change_under_later_writes() {
        let d: KernelDispatch<u32> = KernelDispatch::new();
        d.register("x", Arc::new(1));
        let before = d.snapshot();
        d.register("y", Arc::new(2));
        assert_eq!(before.len(), 1);
        assert_eq!(d.snapshot().len(), 2);
    }

    /// The message a caught panic carries.
    fn message(payload: &(dyn core::any::Any + Send)) -> &str {
        payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("<not a string>")
    }

    // Under `std` and without it: the re-entrant call is detected before the install lock.
    #[test]
    fn a_reentrant_ensure_installed_panics_with_a_message_and_the_outer_install_completes() {
        let d: KernelDispatch<u32> = KernelDispatch::new();
        let mut inner = None;
        d.ensure_installed(|d| {
            d.register("outer", Arc::new(1));
            inner = Some(catch_unwind(AssertUnwindSafe(|| {
                d.ensure_installed(|d| {
                    d.register("inner", Arc::new(2));
                })
            })));
        });
        let payload = inner.unwrap().unwrap_err();
        assert_eq!(
            message(&*payload),
            "KernelDispatch::ensure_installed was called from inside its own installer; the \
             installer must register kernels with `register`, not call ensure_installed"
        );
        assert!(d.is_installed());
        assert_eq!(d.get("outer").as_deref(), Some(&1));
        assert_eq!(d.get("inner"), None);
        // Installed: a later call (same thread, no installer running) returns at once.
        d.ensure_installed(|_| unreachable!("installed already"));
    }

    #[test]
    fn an_installer_that_panics_leaves_the_dispatch_uninstalled_and_the_next_call_installs() {
        let d: KernelDispatch<u32> = KernelDispatch::new();
        let failed = catch_unwind(AssertUnwindSafe(|| {
            d.ensure_installed(|d| {
                d.ensure_installed(|_| {});
            })
        }));
        assert_eq!(message(&*failed.unwrap_err()), REENTRANT_INSTALL);
        assert!(!d.is_installed());
        d.ensure_installed(|d| {
            d.register("k", Arc::new(3));
        });
        assert!(d.is_installed());
        assert_eq!(d.get("k").as_deref(), Some(&3));
    }
}
