// franz-go consumer groups (classic protocol, default cooperative-sticky balancer): 3 members of one
// group on a 6-partition topic get disjoint assignments covering all 6; the group receives every
// record; after kill -9 of one member (a worker subprocess: no LeaveGroup) the survivors cover all 6
// and receive new records; a second group on the same topic receives every record.
// Prints PASS/FAIL per check and a final "N passed, N failed" line.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"sluice/compat/go/internal/suite"
)

const partitions = 6

type event struct {
	Kind       string  `json:"kind"`
	Partitions []int32 `json:"partitions,omitempty"`
	Value      string  `json:"value,omitempty"`
}

// worker consumes as one group member and reports its full assignment and every value on stdout.
func worker(bootstrap, group, topic string) {
	var mu sync.Mutex
	owned := map[int32]bool{}
	enc := json.NewEncoder(os.Stdout)
	report := func() {
		ps := []int32{}
		for p := range owned {
			ps = append(ps, p)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		enc.Encode(event{Kind: "assign", Partitions: ps})
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(suite.Seeds(bootstrap)...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(6*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.AutoCommitInterval(200*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range m[topic] {
				owned[p] = true
			}
			report()
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range m[topic] {
				delete(owned, p)
			}
			report()
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range m[topic] {
				delete(owned, p)
			}
			report()
		}),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for {
		fs := cl.PollFetches(context.Background())
		mu.Lock()
		fs.EachRecord(func(r *kgo.Record) { enc.Encode(event{Kind: "msg", Value: string(r.Value)}) })
		mu.Unlock()
	}
}

type member struct {
	name  string
	cmd   *exec.Cmd
	mu    sync.Mutex
	parts []int32
	seen  *sync.Map
}

func startMember(bootstrap, group, topic, name string, seen *sync.Map) (*member, error) {
	m := &member{name: name, seen: seen}
	m.cmd = exec.Command(os.Args[0], "worker", bootstrap, group, topic)
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	m.cmd.Stderr = os.Stderr
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev event
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			switch ev.Kind {
			case "assign":
				m.mu.Lock()
				m.parts = ev.Partitions
				m.mu.Unlock()
			case "msg":
				m.seen.Store(ev.Value, true)
			}
		}
	}()
	return m, nil
}

func (m *member) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int32(nil), m.parts...)
}

func (m *member) kill() {
	if m.cmd.Process != nil {
		m.cmd.Process.Signal(syscall.SIGKILL)
		m.cmd.Wait()
	}
}

func waitCover(ms []*member, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	stable := 0
	last := ""
	for time.Now().Before(deadline) {
		union := map[int32]bool{}
		total := 0
		empty := false
		var desc []string
		for _, m := range ms {
			ps := m.partitions()
			if len(ps) == 0 {
				empty = true
			}
			for _, p := range ps {
				union[p] = true
			}
			total += len(ps)
			desc = append(desc, fmt.Sprintf("%s=%v", m.name, ps))
		}
		last = strings.Join(desc, " ")
		if len(union) == partitions && total == partitions && !empty {
			stable++
		} else {
			stable = 0
		}
		if stable >= 10 {
			return last, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "", fmt.Errorf("assignments never covered all %d partitions disjointly: %s", partitions, last)
}

func waitSeen(seen *sync.Map, want []string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	missing := len(want)
	for time.Now().Before(deadline) {
		missing = 0
		for _, v := range want {
			if _, ok := seen.Load(v); !ok {
				missing++
			}
		}
		if missing == 0 {
			return fmt.Sprintf("%d records", len(want)), nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "", fmt.Errorf("missing %d of %d records", missing, len(want))
}

func main() {
	if len(os.Args) == 5 && os.Args[1] == "worker" {
		worker(os.Args[2], os.Args[3], os.Args[4])
		return
	}
	bootstrap, prefix := suite.Start()
	topic := prefix + "-go-groups"
	defer suite.Finish()
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(suite.Seeds(bootstrap)...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if !suite.Check("kgo.NewClient", err, "") {
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var produced []string
	produce := func(from, to int) error {
		for i := from; i < to; i++ {
			v := fmt.Sprintf("go-%06d", i)
			r := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: []byte(v)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				return err
			}
			produced = append(produced, v)
		}
		return nil
	}
	err = func() error {
		resp, err := adm.CreateTopics(ctx, partitions, 1, nil, topic)
		if err != nil {
			return err
		}
		if r := resp[topic]; r.Err != nil {
			return r.Err
		}
		time.Sleep(500 * time.Millisecond)
		return produce(0, 300)
	}()
	if !suite.Check("create a 6-partition topic and produce 300 records", err, "") {
		return
	}
	seen := &sync.Map{}
	var ms []*member
	for i := 0; i < 3; i++ {
		m, err := startMember(bootstrap, prefix+"-go-g1", topic, fmt.Sprintf("go-%d", i), seen)
		if !suite.Check(fmt.Sprintf("start member %d", i), err, "") {
			return
		}
		ms = append(ms, m)
	}
	var others []*member
	defer func() {
		for _, m := range append(ms, others...) {
			m.kill()
		}
	}()
	d, err := waitCover(ms, 60*time.Second)
	suite.Check("3 members get disjoint assignments covering all 6 partitions", err, d)
	d, err = waitSeen(seen, produced, 60*time.Second)
	suite.Check("the group receives every record", err, d)
	ms[2].kill()
	d, err = waitCover(ms[:2], 60*time.Second)
	suite.Check("after kill -9 of one member the other two cover all 6 partitions", err, d)
	err = produce(300, 360)
	if suite.Check("produce 60 more records", err, "") {
		d, err = waitSeen(seen, produced, 60*time.Second)
		suite.Check("survivors receive records produced after the failover", err, d)
	}
	seen2 := &sync.Map{}
	for i := 0; i < 2; i++ {
		m, err := startMember(bootstrap, prefix+"-go-g2", topic, fmt.Sprintf("go2-%d", i), seen2)
		if err == nil {
			others = append(others, m)
		}
	}
	d, err = waitSeen(seen2, produced, 60*time.Second)
	suite.Check("a second group on the same topic receives every record", err, d)
	err = func() error {
		deadline := time.Now().Add(30 * time.Second)
		var sum int64
		for time.Now().Before(deadline) {
			offs, err := adm.FetchOffsets(ctx, prefix+"-go-g1")
			if err == nil {
				sum = 0
				offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
				if sum == int64(len(produced)) {
					return nil
				}
			}
			time.Sleep(500 * time.Millisecond)
		}
		return fmt.Errorf("committed offsets sum to %d, want %d", sum, len(produced))
	}()
	suite.Check("committed offsets reach the log end (kadm.FetchOffsets)", err, "")
}
