//! Measurements kept per size class, shared by the device-copy and the upload
//! choices: a later measurement of a class replaces the earlier one.

use std::sync::Mutex;

/// A measurement of one size class.
pub(crate) trait Measured: Clone {
    /// What tells classes apart; measurements are kept in its order.
    type Class: Ord;
    fn class(&self) -> Self::Class;
}

/// The measurements of a context, one per class.
#[derive(Debug)]
pub(crate) struct Calibrations<T>(Mutex<Vec<T>>);

impl<T> Default for Calibrations<T> {
    fn default() -> Self {
        Calibrations(Mutex::new(Vec::new()))
    }
}

impl<T: Measured> Calibrations<T> {
    /// Keeps `c`, in place of an earlier measurement of its class.
    pub(crate) fn learn(&self, c: T) {
        let mut list = self.0.lock().unwrap_or_else(|p| p.into_inner());
        list.retain(|o| o.class() != c.class());
        list.push(c);
        list.sort_by_key(|c| c.class());
    }

    /// What `f` says of the measurements so far.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&[T]) -> R) -> R {
        f(&self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The measurements so far, smallest class first.
    pub(crate) fn all(&self) -> Vec<T> {
        self.with(|l| l.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq)]
    struct M(u64, f64);

    impl Measured for M {
        type Class = u64;
        fn class(&self) -> u64 {
            self.0
        }
    }

    #[test]
    fn a_class_measured_again_replaces_its_old_result_in_class_order() {
        let c = Calibrations::default();
        c.learn(M(64, 1.0));
        c.learn(M(4, 2.0));
        c.learn(M(64, 3.0));
        assert_eq!(c.all(), vec![M(4, 2.0), M(64, 3.0)]);
        assert_eq!(c.with(|l| l.len()), 2);
    }
}
