package gpumem

import "github.com/prometheus/client_golang/prometheus"

// Collector exports a Source as Prometheus gauges, read at scrape time:
// weft_gpu_memory_used_bytes, weft_gpu_memory_total_bytes,
// weft_gpu_memory_free_bytes and weft_gpu_utilization_ratio, each labelled
// with the device name.
type Collector struct {
	src                     Source
	used, total, free, util *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a collector reading src at each scrape.
func NewCollector(src Source) *Collector {
	l := []string{"gpu"}
	return &Collector{
		src:   src,
		used:  prometheus.NewDesc("weft_gpu_memory_used_bytes", "GPU memory in use (all processes), from NVML.", l, nil),
		total: prometheus.NewDesc("weft_gpu_memory_total_bytes", "GPU memory in total, from NVML.", l, nil),
		free:  prometheus.NewDesc("weft_gpu_memory_free_bytes", "GPU memory free, from NVML.", l, nil),
		util:  prometheus.NewDesc("weft_gpu_utilization_ratio", "Fraction of the last NVML sample period in which a kernel ran.", l, nil),
	}
}

// Describe sends the four descriptors.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.used
	ch <- c.total
	ch <- c.free
	ch <- c.util
}

// Collect reads the source once; a failed read is reported as an invalid
// metric so the scrape shows the error.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	info, err := c.src.Snapshot()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.used, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(info.Used), info.Name)
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(info.Total), info.Name)
	ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(info.Free), info.Name)
	ch <- prometheus.MustNewConstMetric(c.util, prometheus.GaugeValue, info.Utilization, info.Name)
}
