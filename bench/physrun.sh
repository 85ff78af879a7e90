#!/bin/bash
# Runs a program with a malloc library preloaded and samples, every 0.5 s, its Pss, the size of
# nevermore's pool memfd and its page tables; prints the program's last result line and the
# peaks. Physical memory = Pss - Pss_Shmem + max(Pss_Shmem, pool memfd) + VmPTE (for programs
# without shared memory of their own, as the benchmarks here).
# usage: bench/physrun.sh LIB|"" PROGRAM ARGS...   (e.g. "" for glibc)
. "$(dirname "$0")/physmem.sh"
LIB=$1; shift
OUT=$(mktemp)
LD_PRELOAD=$LIB "$@" > "$OUT" 2>&1 &
P=$!
peakm=0; peakp=0; peakphys=0
while kill -0 $P 2>/dev/null; do
  physmem $P || break
  m=$POOL; pss=$PSS; phys=$PHYS
  [ "$m" -gt $peakm ] && peakm=$m; [ "$pss" -gt $peakp ] && peakp=$pss; [ $phys -gt $peakphys ] && peakphys=$phys
  sleep 0.5
done
wait $P
echo "$(grep -E 'ns/op|RESULT' "$OUT" | tail -1) | peak pss $peakp kB, pool memfd $peakm kB, physical $peakphys kB"
rm -f "$OUT"
