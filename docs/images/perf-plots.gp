# SPDX-License-Identifier: LGPL-2.1-or-later
# written by tests/bench/report; run from this folder: gnuplot perf-plots.gp
set terminal pngcairo size 1200,460 font 'sans,10'
set grid
set key top left
set style data linespoints
set output 'perf-resolution.png'
set multiplot layout 1,2
unset logscale
set logscale x; 
set xlabel 'megapixels per frame (480p to 8K), 60 fps, 1 consumer'
set ylabel 'latency p50 (µs), log scale'
set logscale y
plot for [i=0:5] 'perf-resolution.dat' index i using 1:2 title columnheader(1) lw 2
set ylabel 'CPU per frame, producer + one consumer (µs), log scale'
plot for [i=0:5] 'perf-resolution.dat' index i using 1:($4+$5) title columnheader(1) lw 2
unset multiplot
set output 'perf-pool.png'
set multiplot layout 1,2
unset logscale

set xlabel 'pool size (slots = frames in flight), 1080p unpaced'
set ylabel 'latency p50 (µs), log scale'
set logscale y
plot for [i=0:1] 'perf-pool.dat' index i using 1:2 title columnheader(1) lw 2
set ylabel 'CPU per frame, producer + one consumer (µs), log scale'
plot for [i=0:1] 'perf-pool.dat' index i using 1:($4+$5) title columnheader(1) lw 2
unset multiplot
set output 'perf-consumers.png'
set multiplot layout 1,2
unset logscale

set xlabel 'consumers, 1080p unpaced'
set ylabel 'latency p50 (µs), log scale'
set logscale y
plot for [i=0:1] 'perf-consumers.dat' index i using 1:2 title columnheader(1) lw 2
set ylabel 'CPU per frame, producer + one consumer (µs), log scale'
plot for [i=0:1] 'perf-consumers.dat' index i using 1:($4+$5) title columnheader(1) lw 2
unset multiplot
set output 'perf-fanout.png'
set multiplot layout 1,2
unset logscale
set logscale xy
set xlabel 'consumers of one producer, 1080p at 60 fps'
set ylabel 'slowest consumer p50 (µs), log scale'
plot for [i=0:1] 'perf-fanout.dat' index i using 1:7 title columnheader(1) lw 2
set ylabel 'slowest consumer p99 (µs), log scale'
plot for [i=0:1] 'perf-fanout.dat' index i using 1:8 title columnheader(1) lw 2
unset multiplot
unset logscale
set output 'perf-paths.png'
set terminal pngcairo size 1200,520 font 'sans,10'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8
set logscale y
set xtics rotate by -15
set key top left
unset xlabel
set rmargin 8
set ylabel 'latency p50 (µs), 60 fps, 1 consumer, log scale'
plot 'perf-paths.dat' using 2:xtic(1) title '1080p', '' using 3 title '4K'
