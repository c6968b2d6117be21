set terminal pngcairo size 1100,700 font ",11"
set output "paper-experiment.png"
set datafile separator ","
set key outside right top
set logscale x 2
set logscale y 10
set xlabel "one-way delay (ms)"
set ylabel "throughput (MB/s)"
set title "Sequential iSCSI reads through an emulated 1gbit link (medians)"
set grid
set xrange [0.5:128]
plot \
 "paper-experiment.csv" using ($1==0?0.7:$1):2 with linespoints lw 2 title "iperf3, 8 streams", \
 "paper-experiment.csv" using ($1==0?0.7:$1):3 with linespoints title "iperf3, 1 stream", \
 "paper-experiment.csv" using ($1==0?0.7:$1):4 with linespoints lw 3 title "wanbackup (defaults)", \
 "paper-experiment.csv" using ($1==0?0.7:$1):5 with linespoints title "1 x 4 MiB (paper's prototype)", \
 "paper-experiment.csv" using ($1==0?0.7:$1):6 with linespoints title "1 x 128 KiB (paper's baseline)", \
 "paper-experiment.csv" using ($1==0?0.7:$1):7 with linespoints title "iscsi-perf (best)", \
 "paper-experiment.csv" using ($1==0?0.7:$1):8 with linespoints title "qemu-img convert", \
 "paper-experiment.csv" using ($1==0?0.7:$1):9 with lines dt 2 lc rgb "gray40" title "model B/(4d+B/S), B=128 KiB", \
 "paper-experiment.csv" using ($1==0?0.7:$1):10 with lines dt 3 lc rgb "gray40" title "model B/(4d+B/S), B=4 MiB", \
 "paper-experiment.csv" using ($1==0?0.7:$1):11 with lines dt 4 lc rgb "black" title "model min(S, C·W/RTT)"
