// franz-go half of compat/cluster/clients.py: an acks=all idempotent producer and a reader, speaking the
// line protocol the harness parses (the same as the librdkafka and Java programs):
//
//	clients produce BOOTSTRAP TOPIC COUNT RATE   ->  "A <id> <partition> <offset>" per acknowledged record,
//	                                                  "E <id> <error>" per failed one, then "DONE acked=N failed=N"
//	clients consume BOOTSTRAP TOPIC              ->  "R <partition> <offset> <id>" per record up to each
//	                                                  partition's high watermark at the start, then "DONE read=N"
//
// The value of record i is the decimal id i; RATE paces the producer (records per second) so a fault the
// harness injects lands mid-run.
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: clients produce BOOTSTRAP TOPIC COUNT RATE | consume BOOTSTRAP TOPIC")
		os.Exit(2)
	}
	seeds := strings.Split(os.Args[2], ",")
	var err error
	switch os.Args[1] {
	case "produce":
		if len(os.Args) != 6 {
			fmt.Fprintln(os.Stderr, "usage: clients produce BOOTSTRAP TOPIC COUNT RATE")
			os.Exit(2)
		}
		count, e1 := strconv.Atoi(os.Args[4])
		rate, e2 := strconv.Atoi(os.Args[5])
		if e1 != nil || e2 != nil || count < 0 || rate <= 0 {
			fmt.Fprintln(os.Stderr, "COUNT and RATE are positive integers")
			os.Exit(2)
		}
		err = produce(seeds, os.Args[3], count, rate)
	case "consume":
		err = consume(seeds, os.Args[3])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "clients:", err)
		os.Exit(1)
	}
}

func produce(seeds []string, topic string, count, rate int) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence is franz-go's default with acks=all
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordDeliveryTimeout(120*time.Second),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	acked, failed := 0, 0
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < count; i++ {
		if i%100 == 0 {
			due := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
			time.Sleep(time.Until(due))
			mu.Lock()
			out.Flush()
			mu.Unlock()
		}
		id := i
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Value: []byte(strconv.Itoa(id))}, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				fmt.Fprintf(out, "E %d %v\n", id, err)
				return
			}
			acked++
			fmt.Fprintf(out, "A %d %d %d\n", id, r.Partition, r.Offset)
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(out, "DONE acked=%d failed=%d\n", acked, failed)
	return out.Flush()
}

func consume(seeds []string, topic string) error {
	adm, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	cancel()
	adm.Close()
	if err != nil {
		return err
	}
	if err := ends.Error(); err != nil {
		return err
	}
	want := map[int32]int64{}
	assign := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			assign[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}))
	if err != nil {
		return err
	}
	defer cl.Close()
	out := bufio.NewWriter(os.Stdout)
	read := 0
	deadline := time.Now().Add(120 * time.Second)
	for len(want) > 0 {
		if time.Now().After(deadline) {
			out.Flush()
			return fmt.Errorf("still waiting for partitions %v after 120 s", want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(t string, p int32, err error) {
			if err != context.DeadlineExceeded {
				fmt.Fprintf(os.Stderr, "fetch %s[%d]: %v\n", t, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			read++
			fmt.Fprintf(out, "R %d %d %s\n", r.Partition, r.Offset, r.Value)
			if r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	fmt.Fprintf(out, "DONE read=%d\n", read)
	return out.Flush()
}
