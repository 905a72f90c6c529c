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
plot for [i=0:3] 'perf-resolution.dat' index i using 1:2 title columnheader(1) lw 2
set ylabel 'CPU per frame, producer + one consumer (µs), log scale'
plot for [i=0:3] 'perf-resolution.dat' index i using 1:($4+$5) title columnheader(1) lw 2
unset multiplot
set output 'perf-pool.png'
set multiplot layout 1,2
unset logscale

set xlabel 'pool size (slots = frames in flight), 1080p unpaced'
set ylabel 'latency p50 (µs), log scale'
set logscale y
plot for [i=0:3] 'perf-pool.dat' index i using 1:2 title columnheader(1) lw 2
set ylabel 'CPU per frame, producer + one consumer (µs), log scale'
plot for [i=0:3] 'perf-pool.dat' index i using 1:($4+$5) title columnheader(1) lw 2
unset multiplot
set output 'perf-consumers.png'
set multiplot layout 1,2
unset logscale

set xlabel 'consumers, 1080p unpaced'
set ylabel 'latency p50 (µs), log scale'
set logscale y
plot for [i=0:3] 'perf-consumers.dat' index i using 1:2 title columnheader(1) lw 2
set ylabel 'CPU per frame, producer + one consumer (µs), log scale'
plot for [i=0:3] 'perf-consumers.dat' index i using 1:($4+$5) title columnheader(1) lw 2
unset multiplot
