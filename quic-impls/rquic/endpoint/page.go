package main

// The page-load workload: a web page replayed as a graph of activities (fecbench-page-1, written by fecbench:
// fecbench/pages/graph.py), as Epload replays one. A download is a stream of its own ("PAGE <request>
// <response>\n", the request's bytes, then the response's bytes from the server); a computation waits its time.
// An activity starts once every dependency into it triggered: `ms` after its `after` activity's `on` event
// (start, first_byte, end). Downloads run concurrently on the one connection.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/ioutil"
	"time"

	quic "github.com/lucas-clemente/quic-go"
)

type pageActivity struct {
	ID       string  `json:"id"`
	Kind     string  `json:"kind"`
	Request  int64   `json:"request"`
	Response int64   `json:"response"`
	MS       float64 `json:"ms"`
}

type pageDep struct {
	After string  `json:"after"`
	Then  string  `json:"then"`
	On    string  `json:"on"`
	MS    float64 `json:"ms"`
}

type pageGraph struct {
	Format     string         `json:"format"`
	Name       string         `json:"name"`
	Activities []pageActivity `json:"activities"`
	Deps       []pageDep      `json:"deps"`
	Load       string         `json:"load"`
}

// activityTimes: when an activity started, had its first byte (downloads) and ended, in ms from the page's start.
type activityTimes struct {
	ID        string   `json:"id"`
	Kind      string   `json:"kind"`
	StartMS   *float64 `json:"start_ms"`
	FirstByte *float64 `json:"first_byte_ms"`
	EndMS     *float64 `json:"end_ms"`
}

// pageEvent: an activity's event (or its failure) as the goroutine running it saw it.
type pageEvent struct {
	act int
	on  string
	at  time.Time
	err error
}

func readPage(path string) (*pageGraph, error) {
	body, err := ioutil.ReadFile(path)
	if err != nil {
		return nil, err
	}
	g := &pageGraph{}
	if err := json.Unmarshal(body, g); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return g, g.check()
}

// check: what the scheduler relies on (fecbench checked the rest, cycles included: one left makes the load fail).
func (g *pageGraph) check() error {
	if g.Format != "fecbench-page-1" || len(g.Activities) == 0 {
		return fmt.Errorf("not a fecbench-page-1 graph with activities")
	}
	kinds := map[string]string{}
	for _, a := range g.Activities {
		if _, twice := kinds[a.ID]; twice || (a.Kind != "download" && a.Kind != "compute") {
			return fmt.Errorf("activity %q: a unique id and kind download or compute", a.ID)
		}
		if a.Kind == "download" && (a.Request < 0 || a.Response < 1) {
			return fmt.Errorf("download %q: request >= 0 and response >= 1 bytes", a.ID)
		}
		kinds[a.ID] = a.Kind
	}
	for i := range g.Deps {
		d := &g.Deps[i]
		if d.On == "" {
			d.On = "end"
		}
		if kinds[d.After] == "" || kinds[d.Then] == "" || d.MS < 0 {
			return fmt.Errorf("dependency %s -> %s: unknown activity or negative ms", d.After, d.Then)
		}
		if d.On != "start" && d.On != "end" && (d.On != "first_byte" || kinds[d.After] != "download") {
			return fmt.Errorf("dependency %s -> %s: on %q", d.After, d.Then, d.On)
		}
	}
	if g.Load != "" && kinds[g.Load] == "" {
		return fmt.Errorf("the load activity %q is no activity", g.Load)
	}
	return nil
}

// loadPage replays the graph on the session and fills m (dct_ms: the page load time, bytes_app, page); on a
// failure, what failed and why (the report of what happened so far is kept in m).
func loadPage(ctx context.Context, sess quic.Session, g *pageGraph, m map[string]interface{}) (string, error) {
	index := map[string]int{}
	for i, a := range g.Activities {
		index[a.ID] = i
	}
	waiting := make([]int, len(g.Activities))
	for _, d := range g.Deps {
		waiting[index[d.Then]]++
	}
	events := make(chan pageEvent, 4*len(g.Activities))
	triggered := make(chan int, len(g.Deps)+1)
	report := make([]activityTimes, len(g.Activities))
	for i, a := range g.Activities {
		report[i] = activityTimes{ID: a.ID, Kind: a.Kind}
	}
	t0 := time.Now()
	var received int64
	defer func() {
		m["bytes_app"] = received
		m["page"] = map[string]interface{}{"name": g.Name, "load_ms": m["dct_ms"], "activities": report}
	}()
	start := func(i int) {
		go runActivity(ctx, sess, g.Activities[i], i, events)
	}
	for i := range g.Activities {
		if waiting[i] == 0 {
			start(i)
		}
	}
	for ended := 0; ended < len(g.Activities); {
		select {
		case ev := <-events:
			if ev.err != nil {
				return "page load", fmt.Errorf("%s %s: %v", g.Activities[ev.act].Kind, g.Activities[ev.act].ID, ev.err)
			}
			at := ms(ev.at.Sub(t0))
			noteEvent(&report[ev.act], ev.on, at)
			if ev.on == "end" {
				ended++
				received += g.Activities[ev.act].Request + g.Activities[ev.act].Response
			}
			for _, d := range g.Deps {
				if d.After == g.Activities[ev.act].ID && d.On == ev.on {
					trigger(index[d.Then], d.MS, triggered)
				}
			}
		case i := <-triggered:
			if waiting[i]--; waiting[i] == 0 {
				start(i)
			}
		case <-ctx.Done():
			return "page load", ctx.Err()
		}
	}
	m["dct_ms"] = pageLoadMS(g, report)
	return "", nil
}

func trigger(then int, delayMS float64, triggered chan<- int) {
	if delayMS <= 0 {
		triggered <- then
		return
	}
	time.AfterFunc(time.Duration(delayMS*float64(time.Millisecond)), func() { triggered <- then })
}

func noteEvent(t *activityTimes, on string, at float64) {
	switch on {
	case "start":
		t.StartMS = &at
	case "first_byte":
		t.FirstByte = &at
	default:
		t.EndMS = &at
	}
}

// pageLoadMS: the load activity's end, else the last end.
func pageLoadMS(g *pageGraph, report []activityTimes) float64 {
	last := 0.0
	for _, t := range report {
		if t.ID == g.Load {
			return *t.EndMS
		}
		if *t.EndMS > last {
			last = *t.EndMS
		}
	}
	return last
}

func runActivity(ctx context.Context, sess quic.Session, a pageActivity, i int, events chan<- pageEvent) {
	events <- pageEvent{act: i, on: "start", at: time.Now()}
	if a.Kind == "compute" {
		select {
		case <-time.After(time.Duration(a.MS * float64(time.Millisecond))):
			events <- pageEvent{act: i, on: "end", at: time.Now()}
		case <-ctx.Done():
		}
		return
	}
	if err := fetchObject(ctx, sess, a, i, events); err != nil {
		events <- pageEvent{act: i, err: err}
		return
	}
	events <- pageEvent{act: i, on: "end", at: time.Now()}
}

// fetchObject: one download on a stream of its own; its first response byte is an event.
func fetchObject(ctx context.Context, sess quic.Session, a pageActivity, i int, events chan<- pageEvent) error {
	str, err := sess.OpenStreamSync(ctx)
	if err != nil {
		return fmt.Errorf("opening its stream: %v", err)
	}
	if _, err := fmt.Fprintf(str, "PAGE %d %d\n", a.Request, a.Response); err != nil {
		return fmt.Errorf("request: %v", err)
	}
	if err := writeBytes(str, a.Request); err != nil {
		return fmt.Errorf("request: %v", err)
	}
	str.Close()
	if deadline, ok := ctx.Deadline(); ok {
		str.SetReadDeadline(deadline)
	}
	first := make([]byte, 1)
	if _, err := io.ReadFull(str, first); err != nil {
		return fmt.Errorf("response: %v", err)
	}
	events <- pageEvent{act: i, on: "first_byte", at: time.Now()}
	got, err := io.Copy(ioutil.Discard, str)
	if err != nil {
		return fmt.Errorf("response after %d of %d bytes: %v", got+1, a.Response, err)
	}
	if got+1 != a.Response {
		return fmt.Errorf("response of %d bytes, expected %d", got+1, a.Response)
	}
	return nil
}
