# Sourced by the benchmark scripts. `physmem PID` sets, in KiB, PHYS to the process's physical
# memory as in BENCHMARKS.md "Method": Pss - Pss_Shmem + max(Pss_Shmem, pool memfd) + VmPTE
# (for programs without shared memory of their own), and PSS, POOL (the size of nevermore's
# pool memfd, 0 without it) and PTE; returns 1, with PHYS empty, once the process is gone.
physmem() {
  local fd r sh
  POOL=0; PHYS=
  for fd in /proc/$1/fd/*; do
    case "$(readlink "$fd" 2>/dev/null)" in *nevermore-pool*) POOL=$(( $(stat -L -c '%b' "$fd" 2>/dev/null || echo 0) / 2 ));; esac
  done
  r=$(cat /proc/$1/smaps_rollup 2>/dev/null)
  PSS=$(echo "$r" | awk '/^Pss:/{print $2}'); sh=$(echo "$r" | awk '/^Pss_Shmem:/{print $2}')
  PTE=$(awk '/^VmPTE:/{print $2}' /proc/$1/status 2>/dev/null)
  [ -z "$PSS" ] || [ -z "$PTE" ] && return 1
  PHYS=$(( PSS - sh + (POOL > sh ? POOL : sh) + PTE ))
}
