// benchgo: the Go benchmark client of scripts/bench, built on franz-go (github.com/twmb/franz-go/pkg/kgo).
//
// The Java clients (ProducerPerformance, BenchClient) need more CPU per record than either broker, so
// with both pinned to one core each they, not the broker, bound throughput. This client does the same
// work with about a tenth of their CPU per record (about 1 µs at 1 KiB, near what Sluice's broker
// needs), so the broker's own capacity can show. The same binary runs against both brokers.
//
//	benchgo produce BOOTSTRAP TOPIC RECORDS RECORD_SIZE ACKS(1|all)
//	        unkeyed records, linger 5 ms, batches up to 128 KiB, sticky partitioning by 128 KiB (as
//	        Java's default partitioner with batch.size=131072), no compression (ProducerPerformance's
//	        default); acks=all is idempotent (Java's default), acks=1 is not (franz-go allows
//	        idempotence only with acks=all) and keeps 5 requests in flight per broker (Java's default)
//	benchgo consume BOOTSTRAP TOPIC PARTITIONS RECORDS
//	        reads RECORDS from the start of partitions 0..PARTITIONS-1, direct assignment (no group),
//	        fetch sizes as the Java consumer's defaults (50 MiB per fetch, 1 MiB per partition, 500 ms)
//
// Each mode prints one line "RESULT {json}" on stdout (BenchClient's convention), with the records,
// bytes and seconds of the measured phase, and this process's CPU in it (getrusage utime+stime).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	linger        = 5 * time.Millisecond
	batchMaxBytes = 128 << 10
	// Enough buffered records that the producer is never waiting for acknowledgements with nothing to
	// send: 32 MiB (Java's buffer.memory default) is 256 batches of 128 KiB, far more than 6 partitions
	// x 5 requests in flight.
	maxBufferedBytes   = 32 << 20
	maxBufferedRecords = 1 << 20
	runTimeout         = 10 * time.Minute
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var (
		res map[string]any
		err error
	)
	switch os.Args[1] {
	case "produce":
		if len(os.Args) != 7 {
			usage()
		}
		res, err = produce(os.Args[2], os.Args[3], atoi(os.Args[4]), atoi(os.Args[5]), os.Args[6])
	case "consume":
		if len(os.Args) != 6 {
			usage()
		}
		res, err = consume(os.Args[2], os.Args[3], atoi(os.Args[4]), atoi(os.Args[5]))
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchgo:", err)
		os.Exit(1)
	}
	res["gomaxprocs"] = runtime.GOMAXPROCS(0)
	line, err := json.Marshal(res)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchgo:", err)
		os.Exit(1)
	}
	fmt.Printf("RESULT %s\n", line)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: benchgo produce BOOTSTRAP TOPIC RECORDS RECORD_SIZE 1|all\n"+
		"       benchgo consume BOOTSTRAP TOPIC PARTITIONS RECORDS")
	os.Exit(2)
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		fmt.Fprintf(os.Stderr, "benchgo: %q is not a positive integer\n", s)
		os.Exit(2)
	}
	return n
}

// cpuSeconds is this process's user + system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// measured fills the fields every mode reports for its measured phase.
func measured(records, bytes int64, secs, cpu float64) map[string]any {
	return map[string]any{
		"records":              records,
		"bytes":                bytes,
		"seconds":              round(secs, 3),
		"records_per_sec":      round(float64(records)/secs, 1),
		"mb_per_sec":           round(float64(bytes)/secs/(1<<20), 2),
		"client_process_cpu_s": round(cpu, 3),
	}
}

func round(v float64, digits int) float64 {
	p, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', digits, 64), 64)
	return p
}

// requests counts, through franz-go's hooks, the Produce and Fetch requests written and the produce
// batches acknowledged: how the client batched against each broker. Hooks run on several goroutines.
type requests struct {
	produce, fetch, batches, batchRecords, batchBytes atomic.Int64
}

func (c *requests) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	switch key {
	case 0: // Produce
		c.produce.Add(1)
	case 1: // Fetch
		c.fetch.Add(1)
	}
}

func (c *requests) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	c.batches.Add(1)
	c.batchRecords.Add(int64(m.NumRecords))
	c.batchBytes.Add(int64(m.UncompressedBytes))
}

func produce(bootstrap, topic string, n, size int, acks string) (map[string]any, error) {
	var reqs requests
	opts := []kgo.Opt{
		kgo.WithHooks(&reqs),
		kgo.SeedBrokers(bootstrap),
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(linger),
		kgo.ProducerBatchMaxBytes(batchMaxBytes),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.UniformBytesPartitioner(batchMaxBytes, true, true, nil)),
		kgo.MaxBufferedBytes(maxBufferedBytes),
		kgo.MaxBufferedRecords(maxBufferedRecords),
	}
	switch acks {
	case "all":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
			kgo.MaxProduceRequestsInflightPerBroker(5))
	default:
		return nil, fmt.Errorf("acks must be 1 or all, not %q", acks)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	// connected before the clock starts (the topic's metadata is then loaded by the first Produce, as
	// ProducerPerformance's first send does)
	if err := cl.Ping(ctx); err != nil {
		return nil, fmt.Errorf("ping: %w", err)
	}

	value := make([]byte, size)
	for i := range value {
		value[i] = 'v'
	}
	// send-to-acknowledgement latency of every record, µs (franz-go stamps Timestamp in Produce)
	lat := make([]uint32, n)
	var acked, failed atomic.Int64
	var firstErr atomic.Value
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			if failed.Add(1) == 1 {
				firstErr.Store(err)
			}
			return
		}
		us := time.Since(r.Timestamp).Microseconds()
		lat[acked.Add(1)-1] = uint32(min(us, 1<<32-1))
	}

	cpu0 := cpuSeconds()
	start := time.Now()
	for range n {
		cl.Produce(ctx, &kgo.Record{Value: value}, promise)
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, fmt.Errorf("flush: %w", err)
	}
	secs := time.Since(start).Seconds()
	cpu := cpuSeconds() - cpu0
	if f := failed.Load(); f > 0 {
		return nil, fmt.Errorf("%d of %d records failed, first: %v", f, n, firstErr.Load())
	}
	if a := acked.Load(); a != int64(n) {
		return nil, fmt.Errorf("%d of %d records acknowledged", a, n)
	}
	slices.Sort(lat)
	pct := func(q float64) float64 { return float64(lat[min(n-1, int(float64(n)*q))]) / 1000 }
	res := measured(int64(n), int64(n)*int64(size), secs, cpu)
	res["acks"] = acks
	if b, r := reqs.batches.Load(), reqs.produce.Load(); b > 0 && r > 0 {
		res["produce_requests"] = r
		res["records_per_request_avg"] = round(float64(n)/float64(r), 1)
		res["batches"] = b
		res["records_per_batch_avg"] = round(float64(reqs.batchRecords.Load())/float64(b), 1)
		res["batch_bytes_avg"] = round(float64(reqs.batchBytes.Load())/float64(b), 0)
	}
	res["p50_ms"] = round(pct(0.5), 3)
	res["p95_ms"] = round(pct(0.95), 3)
	res["p99_ms"] = round(pct(0.99), 3)
	res["p999_ms"] = round(pct(0.999), 3)
	res["max_ms"] = round(float64(lat[n-1])/1000, 3)
	return res, nil
}

func consume(bootstrap, topic string, partitions, n int) (map[string]any, error) {
	offsets := make(map[int32]kgo.Offset, partitions)
	for p := range partitions {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
	}
	// The client starts fetching as soon as it exists, so the clock starts before it (connecting and
	// listing offsets on loopback take a few ms of a multi-second run).
	var reqs requests
	cpu0 := cpuSeconds()
	start := time.Now()
	cl, err := kgo.NewClient(
		kgo.WithHooks(&reqs),
		kgo.SeedBrokers(bootstrap),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxBytes(50<<20),
		kgo.FetchMaxPartitionBytes(1<<20),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()

	var records, bytes, polls int64
	for records < int64(n) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("after %d of %d records: %w", records, n, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("%s[%d]: %w", t, p, err))
		})
		if ferr != nil {
			return nil, ferr
		}
		polls++
		fs.EachRecord(func(r *kgo.Record) {
			records++
			bytes += int64(len(r.Key) + len(r.Value))
		})
	}
	secs := time.Since(start).Seconds()
	cpu := cpuSeconds() - cpu0
	res := measured(records, bytes, secs, cpu)
	res["polls"] = polls
	if f := reqs.fetch.Load(); f > 0 {
		res["fetches"] = f
		res["records_per_request_avg"] = round(float64(records)/float64(f), 1)
	}
	return res, nil
}
