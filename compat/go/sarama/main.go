// sarama compat suite: ClusterAdmin creates a 6-partition topic, an idempotent AsyncProducer (acks=all)
// sends N keyed records, a partition consumer per partition (no group) reads them all back.
package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

const partitions = 6

var passed, failed int

func check(name string, ok bool, detail string) bool {
	if ok {
		passed++
		if detail != "" {
			fmt.Printf("PASS %s (%s)\n", name, detail)
		} else {
			fmt.Printf("PASS %s\n", name)
		}
	} else {
		failed++
		fmt.Printf("FAIL %s: %s\n", name, detail)
	}
	return ok
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func finish() {
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		os.Exit(1)
	}
	os.Exit(0)
}

func getenv(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

func clientVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/IBM/sarama" {
				return d.Version
			}
		}
	}
	return "?"
}

func config() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V3_0_0_0 // idempotence needs >= 0.11; ApiVersions negotiation caps each API
	c.ApiVersionsRequest = true
	c.ClientID = "sluice-compat-sarama"
	c.Metadata.Retry.Max = 10
	c.Metadata.Retry.Backoff = 200 * time.Millisecond
	return c
}

type rec struct {
	part      int32
	off       int64
	key, want string
}

func main() {
	bootstrap := getenv("BOOTSTRAP", "127.0.0.1:9092")
	prefix := getenv("TOPIC_PREFIX", fmt.Sprintf("compat-%d", time.Now().Unix()))
	n, _ := strconv.Atoi(getenv("SARAMA_RECORDS", "20000"))
	fmt.Printf("CLIENT_VERSION: sarama %s\n", clientVersion())
	fmt.Printf("bootstrap=%s prefix=%s records=%d\n", bootstrap, prefix, n)
	topic := prefix + "-sarama"
	brokers := []string{bootstrap}

	// 1. ClusterAdmin.CreateTopic
	err := func() error {
		adm, err := sarama.NewClusterAdmin(brokers, config())
		if err != nil {
			return err
		}
		defer adm.Close()
		if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false); err != nil {
			return err
		}
		cl, err := sarama.NewClient(brokers, config())
		if err != nil {
			return err
		}
		defer cl.Close()
		deadline := time.Now().Add(30 * time.Second)
		for {
			_ = cl.RefreshMetadata(topic)
			ps, err := cl.Partitions(topic)
			if err == nil && len(ps) == partitions {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("metadata: %d partitions (%v), want %d", len(ps), err, partitions)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	if !check("ClusterAdmin.CreateTopic(6 partitions)", err == nil, errText(err)) {
		finish()
	}

	// 2. idempotent AsyncProducer, acks=all
	wantKey := make(map[string]string, n)
	acked := make(map[string][2]int64, n)
	err = func() error {
		c := config()
		c.Producer.RequiredAcks = sarama.WaitForAll
		c.Producer.Idempotent = true
		c.Net.MaxOpenRequests = 1
		c.Producer.Retry.Max = 10
		c.Producer.Return.Successes = true
		c.Producer.Return.Errors = true
		c.Producer.Flush.Frequency = 5 * time.Millisecond
		p, err := sarama.NewAsyncProducer(brokers, c)
		if err != nil {
			return err
		}
		t0 := time.Now()
		done := make(chan error, 1)
		go func() {
			var firstErr error
			nerr := 0
			for i := 0; i < n; i++ {
				select {
				case m := <-p.Successes():
					v, _ := m.Value.Encode()
					acked[string(v)] = [2]int64{int64(m.Partition), m.Offset}
				case e := <-p.Errors():
					nerr++
					if firstErr == nil {
						firstErr = e.Err
					}
				case <-time.After(60 * time.Second):
					done <- fmt.Errorf("no delivery report for 60s after %d of %d", i, n)
					return
				}
			}
			if nerr > 0 {
				done <- fmt.Errorf("%d produce errors, first: %v", nerr, firstErr)
				return
			}
			done <- nil
		}()
		for i := 0; i < n; i++ {
			k := fmt.Sprintf("key-%d", i%1009)
			v := fmt.Sprintf("value-%07d-%s", i, strings.Repeat("s", i%64))
			wantKey[v] = k
			p.Input() <- &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(k), Value: sarama.StringEncoder(v)}
		}
		err = <-done
		p.Close()
		if err != nil {
			return err
		}
		keyPart := map[string]int64{}
		for v, po := range acked {
			if p, ok := keyPart[wantKey[v]]; ok && p != po[0] {
				return fmt.Errorf("key %s acked on partitions %d and %d", wantKey[v], p, po[0])
			}
			keyPart[wantKey[v]] = po[0]
		}
		fmt.Printf("  produced %d in %.1fs\n", n, time.Since(t0).Seconds())
		return nil
	}()
	if !check(fmt.Sprintf("AsyncProducer(idempotent, acks=all) %d keyed records all acknowledged", n), err == nil && len(acked) == n, errText(err)) {
		finish()
	}

	// 3. partition consumers (no group) from the oldest offset
	var recs []rec
	err = func() error {
		c := config()
		c.Consumer.Return.Errors = true
		cons, err := sarama.NewConsumer(brokers, c)
		if err != nil {
			return err
		}
		defer cons.Close()
		out := make(chan rec, 1024)
		errs := make(chan error, partitions)
		var pcs []sarama.PartitionConsumer
		for p := int32(0); p < partitions; p++ {
			pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
			if err != nil {
				return fmt.Errorf("ConsumePartition(%d): %w", p, err)
			}
			pcs = append(pcs, pc)
			go func(pc sarama.PartitionConsumer) {
				for m := range pc.Messages() {
					out <- rec{m.Partition, m.Offset, string(m.Key), string(m.Value)}
				}
			}(pc)
			go func(pc sarama.PartitionConsumer) {
				for e := range pc.Errors() {
					errs <- e
				}
			}(pc)
		}
		defer func() {
			for _, pc := range pcs {
				pc.AsyncClose()
			}
		}()
		deadline := time.After(90 * time.Second)
		for len(recs) < n {
			select {
			case r := <-out:
				recs = append(recs, r)
			case e := <-errs:
				fmt.Printf("  [consumer error] %v\n", e)
			case <-deadline:
				return fmt.Errorf("read %d of %d records within 90s", len(recs), n)
			}
		}
		return nil
	}()
	name := fmt.Sprintf("PartitionConsumer(no group) reads back %d: count, values, per-key partition, contiguous offsets", n)
	if err != nil {
		check(name, false, err.Error())
		finish()
	}
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].part != recs[j].part {
			return recs[i].part < recs[j].part
		}
		return recs[i].off < recs[j].off
	})
	seen := map[string]bool{}
	keyPart := map[string]int32{}
	next := map[int32]int64{}
	msg := ""
	for _, r := range recs {
		k, ok := wantKey[r.want]
		switch {
		case !ok:
			msg = fmt.Sprintf("unexpected value %.40q at %d/%d", r.want, r.part, r.off)
		case seen[r.want]:
			msg = fmt.Sprintf("duplicate value %.40q at %d/%d", r.want, r.part, r.off)
		case k != r.key:
			msg = fmt.Sprintf("value %.40q has key %q, want %q", r.want, r.key, k)
		case acked[r.want][0] != int64(r.part) || acked[r.want][1] != r.off:
			msg = fmt.Sprintf("value %.40q read at %d/%d, acked at %v", r.want, r.part, r.off, acked[r.want])
		case r.off != next[r.part]:
			msg = fmt.Sprintf("partition %d offset %d, want %d", r.part, r.off, next[r.part])
		}
		if msg != "" {
			break
		}
		if p, ok := keyPart[k]; ok && p != r.part {
			msg = fmt.Sprintf("key %s on partitions %d and %d", k, p, r.part)
			break
		}
		keyPart[k] = r.part
		seen[r.want] = true
		next[r.part] = r.off + 1
	}
	if msg == "" && len(recs) != n {
		msg = fmt.Sprintf("read %d records, want %d", len(recs), n)
	}
	check(name, msg == "", func() string {
		if msg != "" {
			return msg
		}
		return fmt.Sprintf("per partition %v", next)
	}())
	finish()
}
