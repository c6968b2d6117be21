set terminal pngcairo size 1100,700 font ",11"
set output "write-lun.png"
set datafile separator ","
set key outside right top
set xlabel "one-way delay (ms)"
set ylabel "throughput (MB/s)"
set title "Writing a 1 GiB image to a tgt LUN through an emulated 1 Gbit/s link (medians)"
set grid
set yrange [0:*]
plot \
 "write-lun.csv" using 1:5 with linespoints lw 2 title "iperf3 A->B, 8 streams", \
 "write-lun.csv" using 1:6 with linespoints title "iperf3 A->B, 1 stream", \
 "write-lun.csv" using 1:2 with linespoints lw 3 title "wanbackup restore (defaults)", \
 "write-lun.csv" using 1:3 with linespoints lw 2 title "wanbackup copy (defaults)", \
 "write-lun.csv" using 1:4 with linespoints title "qemu-img convert -n -W -m 16"
