mod common;

// A scaled-down soak (`tests/c/soak.c`) in prevent mode: 5 M allocations, 99% short-lived and
// 1% long-lived (a ring of 4096 replaced at random: lifetimes of ~400 K allocations, so that
// the steady state is reached within the run). Long-lived objects pin mirrors (one VMA each)
// and their page tables, so mappings and VmPTE grow at first; they must then level off.
// Measured on the 2-core machine: ~400 pool mappings and ~30 MiB VmPTE from 1.5 M allocations
// on. Bounds: 1000 lines of /proc/self/maps (2x the plateau, far under vm.max_map_count and
// the allocator's mirror budget of 4096) and 96 MiB VmPTE; and after 3 M allocations mappings
// may grow by at most 50 and VmPTE by at most 15% (measured: both flat, within noise). The full soak (10^9 allocations)
// is a documented command: docs/robustness.md.

use common::*;

struct Sample {
    allocs: u64,
    maps: u64,
    pte_kb: u64,
}

#[test]
fn mappings_and_page_tables_level_off() {
    let bin = compile("soak.c", &[]);
    let o = run_preloaded_timeout(
        &bin,
        &["5000000", "500000", "1000", "98304", "4096"],
        &[("NEVERMORE_OPTIONS", "mode=prevent")],
        120,
    );
    assert_ok(&o);
    assert!(stdout(&o).contains("OK"), "{}", stdout(&o));
    let samples: Vec<Sample> = stdout(&o)
        .lines()
        .filter_map(|l| l.strip_prefix("SAMPLE "))
        .map(|l| {
            let v: Vec<u64> = l.split_whitespace().take(4).map(|x| x.parse().unwrap()).collect();
            Sample { allocs: v[0], maps: v[1], pte_kb: v[3] }
        })
        .collect();
    assert_eq!(samples.len(), 10, "{}", stdout(&o));
    let at_3m = samples.iter().find(|s| s.allocs == 3_000_000).unwrap();
    let peak_maps = samples.iter().map(|s| s.maps).max().unwrap();
    for later in samples.iter().filter(|s| s.allocs > 3_000_000) {
        assert!(
            later.maps <= at_3m.maps + 50,
            "mappings still growing: {} at 3 M, {} at {}",
            at_3m.maps,
            later.maps,
            later.allocs
        );
        assert!(
            later.pte_kb * 100 <= at_3m.pte_kb * 115,
            "page tables still growing: {} kB at 3 M, {} kB at {}",
            at_3m.pte_kb,
            later.pte_kb,
            later.allocs
        );
    }
    assert!(peak_maps <= 1000);
}
