//! The process's layer gate. The Khronos validation layer (1.3.239, and others
//! before its fix) finds the state of every call's instance or device in one
//! process-wide map, which `vkCreateInstance`, `vkCreateDevice` and their
//! destroys change without a lock that the calls take (Vulkan-ValidationLayers
//! issue 4391): one thread making or dropping a context could crash another
//! thread's call on its own device. So every use of a layered instance or
//! device holds the gate shared, and every creation and destruction holds it
//! exclusive.
//!
//! Vulkan made outside vkcopy in the same process (another runtime, such as
//! Halide's, or an application's own instances) takes the same gate through
//! [`calling`] and [`creating`]; otherwise its creations race vkcopy's calls, and
//! vkcopy's creations race its calls.
//!
//! Readers are preferred: a reader waits only while a writer holds the gate,
//! never for a writer that waits, so a thread that holds the gate across a wait
//! for another thread's work cannot deadlock with a creation. A thread that
//! holds the gate shared and creates or destroys lets go of its share while it
//! waits for the others, so two such threads cannot wait for each other.

use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::{Condvar, Mutex, MutexGuard};

struct State {
    /// Threads holding the gate shared.
    readers: usize,
    /// A thread holds the gate exclusive.
    writing: bool,
}

struct Gate {
    state: Mutex<State>,
    changed: Condvar,
}

static GATE: Gate = Gate::new();

thread_local! {
    /// Shares this thread holds (counted once in `readers` while above 0).
    static SHARED: Cell<usize> = const { Cell::new(0) };
    /// Exclusive holds of this thread (nested destroys count once).
    static EXCLUSIVE: Cell<usize> = const { Cell::new(0) };
}

/// The gate held shared while this lives (or nothing, for an instance without
/// layers). Not `Send`: a share belongs to its thread.
#[must_use = "the gate is let go when this is dropped"]
pub struct Shared {
    gate: Option<&'static Gate>,
    _thread: PhantomData<*const ()>,
}

/// The gate held exclusive while this lives. Not `Send`.
#[must_use = "the gate is let go when this is dropped"]
pub struct Exclusive {
    gate: &'static Gate,
    _thread: PhantomData<*const ()>,
}

/// Holds the process's gate shared if `layered`.
pub(crate) fn shared(layered: bool) -> Shared {
    GATE.shared(layered)
}

/// Holds the gate shared around calls into Vulkan objects that vkcopy did not
/// make: a thread of this process then creates or destroys no instance or
/// device (vkcopy's or another holder of [`creating`]) until this is dropped.
/// Nests, and may be held across [`creating`] on the same thread.
pub fn calling() -> Shared {
    GATE.shared(true)
}

/// Holds the gate exclusive around a `vkCreateInstance`, `vkCreateDevice`,
/// `vkDestroyDevice` or `vkDestroyInstance`, vkcopy's own or another's: no
/// call of vkcopy's, or of a holder of [`calling`], runs meanwhile on another
/// thread.
pub fn creating() -> Exclusive {
    GATE.exclusive()
}

impl Gate {
    const fn new() -> Self {
        Gate {
            state: Mutex::new(State {
                readers: 0,
                writing: false,
            }),
            changed: Condvar::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait<'a>(&self, s: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed.wait(s).unwrap_or_else(|p| p.into_inner())
    }

    fn shared(&'static self, layered: bool) -> Shared {
        if !layered {
            return Shared {
                gate: None,
                _thread: PhantomData,
            };
        }
        if SHARED.get() == 0 && EXCLUSIVE.get() == 0 {
            let mut s = self.state();
            while s.writing {
                s = self.wait(s);
            }
            s.readers += 1;
        }
        SHARED.set(SHARED.get() + 1);
        Shared {
            gate: Some(self),
            _thread: PhantomData,
        }
    }

    fn exclusive(&'static self) -> Exclusive {
        if EXCLUSIVE.get() == 0 {
            let mut s = self.state();
            if SHARED.get() > 0 {
                // This thread's share is not in a call now; the others' are.
                s.readers -= 1;
                self.changed.notify_all();
            }
            while s.writing || s.readers > 0 {
                s = self.wait(s);
            }
            s.writing = true;
        }
        EXCLUSIVE.set(EXCLUSIVE.get() + 1);
        Exclusive {
            gate: self,
            _thread: PhantomData,
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let Some(gate) = self.gate else {
            return;
        };
        let n = SHARED.get() - 1;
        SHARED.set(n);
        if n == 0 && EXCLUSIVE.get() == 0 {
            let mut s = gate.state();
            s.readers -= 1;
            if s.readers == 0 {
                gate.changed.notify_all();
            }
        }
    }
}

impl Drop for Exclusive {
    fn drop(&mut self) {
        let n = EXCLUSIVE.get() - 1;
        EXCLUSIVE.set(n);
        if n == 0 {
            let mut s = self.gate.state();
            s.writing = false;
            if SHARED.get() > 0 {
                s.readers += 1;
            }
            self.gate.changed.notify_all();
        }
    }
}

/// A Vulkan function table (`ash::Device`, `ash::Instance`, an extension's)
/// with the layer gate held shared while it is in use.
pub struct Guarded<'a, T> {
    table: &'a T,
    _gate: Shared,
}

impl<'a, T> Guarded<'a, T> {
    pub(crate) fn new(table: &'a T, layered: bool) -> Self {
        Guarded {
            table,
            _gate: shared(layered),
        }
    }
}

impl<T> Deref for Guarded<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.table
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    // Each test has a gate of its own; the process's is in use by other tests.
    impl Gate {
        fn now(&self) -> (usize, bool) {
            let s = self.state();
            (s.readers, s.writing)
        }
    }

    #[test]
    fn a_writer_waits_for_readers_of_other_threads_and_then_excludes_them() {
        static G: Gate = Gate::new();
        let inside = Arc::new(AtomicUsize::new(0));
        let (held_tx, held_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let i = inside.clone();
        let reader = std::thread::spawn(move || {
            let _s = G.shared(true);
            i.store(1, Ordering::SeqCst);
            held_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            i.store(0, Ordering::SeqCst);
        });
        held_rx.recv().unwrap();
        let i = inside.clone();
        let writer = std::thread::spawn(move || {
            let _x = G.exclusive();
            // Only once the reader let go.
            assert_eq!(i.load(Ordering::SeqCst), 0);
            std::thread::sleep(Duration::from_millis(50));
        });
        std::thread::sleep(Duration::from_millis(50));
        go_tx.send(()).unwrap();
        reader.join().unwrap();
        writer.join().unwrap();
        assert_eq!(G.now(), (0, false));
    }

    #[test]
    fn shares_and_exclusive_holds_nest_on_one_thread() {
        static G: Gate = Gate::new();
        {
            let _a = G.shared(true);
            let _b = G.shared(true);
            assert_eq!(G.now().0, 1);
            // A destroy inside a share, and calls inside the destroy.
            let _x = G.exclusive();
            assert_eq!(G.now(), (0, true));
            let _c = G.shared(true);
            let _y = G.exclusive();
        }
        assert_eq!(G.now(), (0, false));
        let _off = G.shared(false);
        assert_eq!(G.now().0, 0);
    }

    #[test]
    fn a_reader_does_not_wait_for_a_waiting_writer() {
        static G: Gate = Gate::new();
        let (held_tx, held_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let first = std::thread::spawn(move || {
            let _s = G.shared(true);
            held_tx.send(()).unwrap();
            go_rx.recv().unwrap();
        });
        held_rx.recv().unwrap();
        let writer = std::thread::spawn(|| drop(G.exclusive()));
        std::thread::sleep(Duration::from_millis(50));
        // The first reader may be waiting for this one's work: it gets in.
        let second = std::thread::spawn(|| drop(G.shared(true)));
        second.join().unwrap();
        go_tx.send(()).unwrap();
        first.join().unwrap();
        writer.join().unwrap();
        assert_eq!(G.now(), (0, false));
    }

    #[test]
    fn two_threads_that_hold_shares_can_both_create() {
        static G: Gate = Gate::new();
        let both = Arc::new(std::sync::Barrier::new(2));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let both = both.clone();
                std::thread::spawn(move || {
                    let _s = G.shared(true);
                    both.wait();
                    drop(G.exclusive());
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(G.now(), (0, false));
    }
}
