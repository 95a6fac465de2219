use super::*;

const GIB: u64 = 1 << 30;

fn heap(used: u64, size: u64) -> HeapUse {
    HeapUse { used, size }
}

/// A real device of one 8 GiB heap with 2 GiB allocations at most.
fn real() -> Limits {
    Limits {
        simulated: None,
        real: heap(0, 8 * GIB),
        max_allocation: 2 * GIB,
        budget: None,
    }
}

#[test]
fn max_allocation_size_bounds_every_block() {
    let l = real();
    assert_eq!(l.refuse(2 * GIB), None);
    assert_eq!(
        l.refuse(2 * GIB + 1),
        Some(NoRoom::TooLarge { max: 2 * GIB })
    );
    // Unknown: no bound.
    let l = Limits {
        max_allocation: 0,
        ..real()
    };
    assert_eq!(l.refuse(u64::MAX), None);
}

#[test]
fn real_heap_bounds_simulated_tables_only() {
    // The driver answers for its own heap on a real device.
    let l = Limits {
        real: heap(7 * GIB, 8 * GIB),
        ..real()
    };
    assert_eq!(l.refuse(2 * GIB), None);
    let sim = Limits {
        simulated: Some(heap(0, 64 * GIB)),
        ..l
    };
    assert_eq!(sim.refuse(GIB), None);
    assert_eq!(
        sim.refuse(GIB + 1),
        Some(NoRoom::Real(heap(7 * GIB, 8 * GIB)))
    );
    // The real heap is checked before the allocation size.
    assert_eq!(
        sim.refuse(3 * GIB),
        Some(NoRoom::Real(heap(7 * GIB, 8 * GIB)))
    );
}

#[test]
fn simulated_heap_first() {
    let l = Limits {
        simulated: Some(heap(900, 1000)),
        real: heap(0, 10),
        ..real()
    };
    assert_eq!(l.refuse(100), Some(NoRoom::Real(heap(0, 10))));
    assert_eq!(l.refuse(101), Some(NoRoom::Simulated));
    // Saturating: a huge request does not wrap around.
    assert_eq!(l.refuse(u64::MAX), Some(NoRoom::Simulated));
}

#[test]
fn simulated_budget() {
    let budget = heap(3 * GIB, 4 * GIB);
    let l = Limits {
        budget: Some(budget),
        ..real()
    };
    assert_eq!(l.refuse(GIB), None);
    assert_eq!(l.refuse(GIB + 1), Some(NoRoom::Budget(budget)));
    // A budget of 0 is none.
    let l = Limits {
        budget: Some(heap(3 * GIB, 0)),
        ..real()
    };
    assert_eq!(l.refuse(GIB + 1), None);
    // The allocation size is checked before the budget.
    let l = Limits {
        budget: Some(heap(4 * GIB, 4 * GIB)),
        ..real()
    };
    assert_eq!(l.refuse(1), Some(NoRoom::Budget(heap(4 * GIB, 4 * GIB))));
    assert_eq!(l.refuse(3 * GIB), Some(NoRoom::TooLarge { max: 2 * GIB }));
}
