# bench/plot/cost-curve.gp: the cost-curve plot of BENCHMARKS.md, from the
# data file `scale render -dat` writes out of bench/scale/results.json
# (bench/scale.sh runs both). Four panels against the records loaded (log
# x): claims/s (batches of 100 solid, single claims dashed), bytes per
# record (disk solid, memory dashed), restart to ready (clean stop solid,
# kill -9 dashed) and sweep time. One colour per store; a store without a
# figure has no point in that panel.
#
# Usage: gnuplot -e "datafile='cost-curve.dat'; outfile='bench/scale/cost-curve.png'" bench/plot/cost-curve.gp
if (!exists("datafile")) datafile = 'cost-curve.dat'
if (!exists("outfile")) outfile = 'cost-curve.png'

set terminal pngcairo size 1400,1000 font ",11"
set output outfile
stats datafile using 1 nooutput
blocks = STATS_blocks

set logscale x 10
set format x "10^{%L}"
set grid
set key outside right top font ",9"
set xlabel "records loaded"
set offsets graph 0.05, graph 0.05, 0, 0
set style line 1 lc rgb "#1b9e77" lw 2 pt 7
set style line 2 lc rgb "#d95f02" lw 2 pt 5
set style line 3 lc rgb "#7570b3" lw 2 pt 9
set style line 4 lc rgb "#e7298a" lw 2 pt 11

set multiplot layout 2,2 title "spent: cost curve of the stores (bench/scale.sh)"

set title "claims/s in process (solid: ClaimBatch of 100; dashed: Claim, 16 goroutines)"
set logscale y 10
set ylabel "claims/s"
plot for [i=0:blocks-1] datafile index i using 1:3 with linespoints ls i+1 title columnheader(1), \
     for [i=0:blocks-1] datafile index i using 1:2 with linespoints ls i+1 dt 2 notitle

set title "bytes per record (solid: on disk; dashed: in memory)"
set ylabel "bytes / record"
plot for [i=0:blocks-1] datafile index i using 1:4 with linespoints ls i+1 title columnheader(1), \
     for [i=0:blocks-1] datafile index i using 1:5 with linespoints ls i+1 dt 2 notitle

set title "restart to ready (solid: after a clean stop; dashed: after kill -9)"
set ylabel "seconds"
plot for [i=0:blocks-1] datafile index i using 1:6 with linespoints ls i+1 title columnheader(1), \
     for [i=0:blocks-1] datafile index i using 1:7 with linespoints ls i+1 dt 2 notitle

set title "sweep of the expired tenth (DeleteExpired in calls of 1000)"
set ylabel "seconds"
plot for [i=0:blocks-1] datafile index i using 1:8 with linespoints ls i+1 title columnheader(1)

unset multiplot
