//! The page-load workload (`--workload page --page FILE`): a web page replayed as a graph of
//! activities, as Epload replays one (Wang et al., NSDI 2014). The harness writes the graph
//! (format `fecbench-page-1`: fecbench/pages/graph.py, which checks it as `Page::check` does). A
//! download is an `exchange REQ RESP` on a stream of its own (transfer.rs: the server needs
//! nothing new), a computation a wait of its time. An activity starts once every dependency into
//! it triggered: `ms` after the `on` event (start, first_byte, end) of its `after` activity.
//! Whatever is ready runs at once, the downloads as concurrent streams of the one connection, as
//! a browser's.
//!
//! Times are tokio's `Instant`s (the scheduler's tests run on paused time), in ms from t0, the
//! workload's start (after the handshake). The schedule's logic is deterministic: activities that
//! become ready on the same event start in the order of the dependencies in the file.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::app::transfer;
use crate::options::metrics::{ms, ActivityTimes, PageReport};
use crate::quic::QuicConn;

pub const FORMAT: &str = "fecbench-page-1";

/// A download's request bytes when the file does not say (graph.py's REQUEST_BYTES: an HTTP/3
/// GET's compressed headers are about this size).
const REQUEST_BYTES: u64 = 300;

fn request_bytes() -> u64 {
    REQUEST_BYTES
}

/// The longest computation or dependency delay, in ms (a day): what a timer can wait without its
/// `Duration` or `Instant` arithmetic overflowing, far beyond any page's.
const MAX_MS: f64 = 86_400_000.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Download,
    Compute,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Download => "download",
            Kind::Compute => "compute",
        }
    }
}

/// The event of an activity a dependency waits for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum On {
    Start,
    FirstByte,
    #[default]
    End,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Activity {
    pub id: String,
    pub kind: Kind,
    /// Downloads: the bytes of the request (up) and of the response (down).
    #[serde(default = "request_bytes")]
    pub request: u64,
    #[serde(default)]
    pub response: u64,
    /// Computations: how long one takes.
    #[serde(default)]
    pub ms: f64,
}

/// `then` starts (once its other dependencies triggered too) `ms` after `after`'s event `on`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dep {
    pub after: String,
    pub then: String,
    #[serde(default)]
    pub on: On,
    #[serde(default)]
    pub ms: f64,
}

/// A page graph as the harness wrote it; `Page::parse` checks it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Page {
    pub format: String,
    #[serde(default)]
    pub name: String,
    /// Where the graph came from (a HAR, an Epload graph): the harness's, not used here.
    #[serde(default)]
    pub source: String,
    pub activities: Vec<Activity>,
    #[serde(default)]
    pub deps: Vec<Dep>,
    /// The activity whose end is the page load; None: the last activity to end.
    #[serde(default)]
    pub load: Option<String>,
}

impl Page {
    /// Read a graph file and check it; the error names the file.
    pub fn load(path: &str) -> Result<Page, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("--page {path}: {e}"))?;
        Page::parse(&text).map_err(|e| format!("--page {path}: {e}"))
    }

    /// A graph from its JSON text, checked.
    pub fn parse(text: &str) -> Result<Page, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        // The format first: another format's keys would only make serde name an unknown field.
        if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(format!(
                "not a {FORMAT} graph (its \"format\" must be {FORMAT:?})"
            ));
        }
        let page: Page = serde_json::from_value(value).map_err(|e| e.to_string())?;
        page.check()?;
        Ok(page)
    }

    /// What the scheduler relies on (as graph.py's `check`): unique ids, sensible numbers,
    /// dependencies between known activities, first_byte of downloads only, a known load
    /// activity, and every activity able to start (no cycle).
    pub fn check(&self) -> Result<(), String> {
        if self.format != FORMAT {
            return Err(format!(
                "not a {FORMAT} graph (its \"format\" must be {FORMAT:?})"
            ));
        }
        if self.activities.is_empty() {
            return Err("no activity".into());
        }
        let kinds = self.check_activities()?;
        self.check_deps(&kinds)?;
        if let Some(load) = &self.load {
            if !kinds.contains_key(load.as_str()) {
                return Err(format!("the load activity {load:?} is no activity"));
            }
        }
        Links::new(self).check_all_start(self)
    }

    /// Each activity's kind by id, once each activity was checked.
    fn check_activities(&self) -> Result<HashMap<&str, Kind>, String> {
        let mut kinds = HashMap::new();
        for a in &self.activities {
            if a.id.is_empty() {
                return Err("an activity without an id".into());
            }
            if kinds.insert(a.id.as_str(), a.kind).is_some() {
                return Err(format!("activity id {:?} twice", a.id));
            }
            match a.kind {
                Kind::Download if a.response == 0 => {
                    return Err(format!(
                        "download {:?}: its response must be >= 1 byte",
                        a.id
                    ));
                }
                Kind::Compute if !(0.0..=MAX_MS).contains(&a.ms) => {
                    let id = &a.id;
                    return Err(format!(
                        "compute {id:?}: ms must be in [0, {MAX_MS}], not {}",
                        a.ms
                    ));
                }
                _ => {}
            }
        }
        Ok(kinds)
    }

    fn check_deps(&self, kinds: &HashMap<&str, Kind>) -> Result<(), String> {
        for d in &self.deps {
            for end in [&d.after, &d.then] {
                if !kinds.contains_key(end.as_str()) {
                    return Err(format!("a dependency names {end:?}, which is no activity"));
                }
            }
            if d.on == On::FirstByte && kinds[d.after.as_str()] != Kind::Download {
                return Err(format!(
                    "{:?} waits for the first byte of {:?}, a computation",
                    d.then, d.after
                ));
            }
            if !(0.0..=MAX_MS).contains(&d.ms) {
                return Err(format!(
                    "dependency {:?} -> {:?}: ms must be in [0, {MAX_MS}], not {}",
                    d.after, d.then, d.ms
                ));
            }
        }
        Ok(())
    }

    /// What a complete load moves: every download's request and response.
    pub fn app_bytes(&self) -> u64 {
        let downloads = self.activities.iter().filter(|a| a.kind == Kind::Download);
        downloads.map(|a| a.request + a.response).sum()
    }

    /// The report before the load: every activity, nothing happened yet.
    pub fn report(&self) -> PageReport {
        let times = |a: &Activity| ActivityTimes {
            id: a.id.clone(),
            kind: a.kind.name().to_string(),
            ..Default::default()
        };
        PageReport {
            name: self.name.clone(),
            load_ms: None,
            activities: self.activities.iter().map(times).collect(),
        }
    }

    /// The page load time of a complete report: the load activity's end, else the last end.
    fn load_ms(&self, report: &PageReport) -> Option<f64> {
        let mut ends = report.activities.iter().map(|t| t.end_ms);
        match &self.load {
            Some(load) => ends.nth(self.activities.iter().position(|a| &a.id == load)?)?,
            None => ends.try_fold(0.0, |last, end| end.map(|end| f64::max(last, end))),
        }
    }
}

/// The graph by index (of a checked page): the dependencies leaving each activity, in the file's
/// order, as (dependency, the activity it leads to), and how many lead into each.
struct Links {
    out: Vec<Vec<(usize, usize)>>,
    into: Vec<usize>,
}

impl Links {
    fn new(page: &Page) -> Links {
        let index: HashMap<&str, usize> = page
            .activities
            .iter()
            .enumerate()
            .map(|(i, a)| (a.id.as_str(), i))
            .collect();
        let mut links = Links {
            out: vec![Vec::new(); page.activities.len()],
            into: vec![0; page.activities.len()],
        };
        for (k, d) in page.deps.iter().enumerate() {
            let then = index[d.then.as_str()];
            links.out[index[d.after.as_str()]].push((k, then));
            links.into[then] += 1;
        }
        links
    }

    /// The activities no dependency leads into: those that start at t0.
    fn roots(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.into.len()).filter(|&i| self.into[i] == 0)
    }

    /// Whether every activity can start: the start order of a replay (whatever the events' times,
    /// an activity starts once all it waits for did, so a cycle's activities never do).
    fn check_all_start(&self, page: &Page) -> Result<(), String> {
        let mut waiting = self.into.clone();
        let mut ready: Vec<usize> = self.roots().collect();
        if ready.is_empty() {
            return Err("every activity waits for another: nothing can start".into());
        }
        let mut started = 0;
        while let Some(i) = ready.pop() {
            started += 1;
            for &(_, then) in &self.out[i] {
                waiting[then] -= 1;
                if waiting[then] == 0 {
                    ready.push(then);
                }
            }
        }
        if started < waiting.len() {
            let stuck: Vec<&str> = (0..waiting.len())
                .filter(|&i| waiting[i] > 0)
                .take(5)
                .map(|i| page.activities[i].id.as_str())
                .collect();
            return Err(format!(
                "a cycle of dependencies: {} can never start",
                stuck.join(", ")
            ));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- scheduler

/// What the activities' tasks tell the scheduler.
enum Msg {
    /// An activity's event, when its task saw it.
    Event(usize, On, Instant),
    Failed(usize, String),
    /// A delayed dependency into this activity triggered.
    Trigger(usize),
}

/// Given to a download: `arrived()` once its first response byte was read (later calls: nothing).
pub struct FirstByte(Option<(usize, mpsc::UnboundedSender<Msg>)>);

impl FirstByte {
    pub fn arrived(&mut self) {
        if let Some((activity, events)) = self.0.take() {
            let _ = events.send(Msg::Event(activity, On::FirstByte, Instant::now()));
        }
    }
}

/// One replay: the dependencies each activity still waits for, the tasks running activities and
/// delayed triggers (dropped with it: a failed load stops its other downloads), the report.
struct Replay<'a, F> {
    page: &'a Page,
    links: &'a Links,
    fetch: F,
    waiting: Vec<usize>,
    ended: usize,
    t0: Instant,
    events: mpsc::UnboundedSender<Msg>,
    tasks: JoinSet<()>,
    report: &'a mut PageReport,
    bytes: &'a mut u64,
}

/// Replay `page`, each download by `fetch(activity, first_byte)`. `report` (from `Page::report`)
/// gets every event as it happens and `bytes` the requests and responses of the downloads ended,
/// so both hold what happened when the load fails or is cut short.
pub async fn replay<F, Fut>(
    page: &Page,
    fetch: F,
    report: &mut PageReport,
    bytes: &mut u64,
) -> Result<(), String>
where
    F: Fn(&Activity, FirstByte) -> Fut,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let links = Links::new(page);
    let (events, mut inbox) = mpsc::unbounded_channel();
    let t0 = Instant::now();
    let mut replay = Replay {
        page,
        links: &links,
        fetch,
        waiting: links.into.clone(),
        ended: 0,
        t0,
        events,
        tasks: JoinSet::new(),
        report,
        bytes,
    };
    for i in links.roots() {
        replay.start(i, t0);
        replay.happened(i, On::Start, t0);
    }
    while replay.ended < page.activities.len() {
        let msg = tokio::select! {
            biased;
            Some(msg) = inbox.recv() => msg,
            Some(Err(e)) = replay.tasks.join_next() => return Err(format!("page load: {e}")),
        };
        match msg {
            Msg::Event(i, on, at) => replay.happened(i, on, at),
            Msg::Trigger(i) => replay.trigger(i),
            Msg::Failed(i, e) => {
                let a = &page.activities[i];
                return Err(format!("{} {}: {e}", a.kind.name(), a.id));
            }
        }
    }
    let load_ms = page.load_ms(replay.report);
    replay.report.load_ms = load_ms;
    Ok(())
}

impl<F, Fut> Replay<'_, F>
where
    F: Fn(&Activity, FirstByte) -> Fut,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    /// Activity `i`'s event `on` at `at`: noted, and the dependencies waiting for it triggered,
    /// at once (starting what waits for nothing else: more events) or by a timer.
    fn happened(&mut self, i: usize, on: On, at: Instant) {
        let (page, links) = (self.page, self.links);
        let mut events = VecDeque::from([(i, on, at)]);
        while let Some((i, on, at)) = events.pop_front() {
            self.note(i, on, at);
            for &(k, then) in &links.out[i] {
                let dep = &page.deps[k];
                if dep.on != on {
                    continue;
                }
                if dep.ms > 0.0 {
                    self.trigger_at(then, at + Duration::from_secs_f64(dep.ms / 1e3));
                } else if self.ready(then) {
                    let now = Instant::now();
                    self.start(then, now);
                    events.push_back((then, On::Start, now));
                }
            }
        }
    }

    fn note(&mut self, i: usize, on: On, at: Instant) {
        let t = Some(ms(at - self.t0));
        let times = &mut self.report.activities[i];
        match on {
            On::Start => times.start_ms = t,
            On::FirstByte => times.first_byte_ms = t,
            On::End => {
                times.end_ms = t;
                self.ended += 1;
                let a = &self.page.activities[i];
                if a.kind == Kind::Download {
                    *self.bytes += a.request + a.response;
                }
            }
        }
    }

    /// One more dependency into `i` triggered: whether `i` waits for no other.
    fn ready(&mut self, i: usize) -> bool {
        self.waiting[i] -= 1;
        self.waiting[i] == 0
    }

    /// A delayed dependency into `i` triggered now.
    fn trigger(&mut self, i: usize) {
        if self.ready(i) {
            let now = Instant::now();
            self.start(i, now);
            self.happened(i, On::Start, now);
        }
    }

    fn trigger_at(&mut self, then: usize, when: Instant) {
        let events = self.events.clone();
        self.tasks.spawn(async move {
            tokio::time::sleep_until(when).await;
            let _ = events.send(Msg::Trigger(then));
        });
    }

    /// Run activity `i`, started at `at`, in a task of its own; it reports its end or failure.
    fn start(&mut self, i: usize, at: Instant) {
        let (a, events) = (&self.page.activities[i], self.events.clone());
        match a.kind {
            Kind::Compute => {
                let end = at + Duration::from_secs_f64(a.ms / 1e3);
                self.tasks.spawn(async move {
                    tokio::time::sleep_until(end).await;
                    let _ = events.send(Msg::Event(i, On::End, Instant::now()));
                });
            }
            Kind::Download => {
                let download = (self.fetch)(a, FirstByte(Some((i, events.clone()))));
                self.tasks.spawn(async move {
                    let msg = match download.await {
                        Ok(()) => Msg::Event(i, On::End, Instant::now()),
                        Err(e) => Msg::Failed(i, e),
                    };
                    let _ = events.send(msg);
                });
            }
        }
    }
}

/// Load the page over `conn`: each download an `exchange` on a stream of its own, both
/// directions' bytes checked (see `replay` for `report` and `bytes`).
pub async fn load<C: QuicConn>(
    conn: &C,
    page: &Page,
    report: &mut PageReport,
    bytes: &mut u64,
) -> Result<(), String> {
    let fetch = |a: &Activity, mut first_byte: FirstByte| {
        let (conn, request, response) = (conn.clone(), a.request, a.response);
        let note_first_byte = move |_| first_byte.arrived();
        async move { transfer::exchange(&conn, request, response, note_first_byte).await }
    };
    replay(page, fetch, report, bytes).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The HTML (first byte at 40 ms, all of it at 100) parsed from its first byte for 50 ms; the
    /// CSS asked when the parse ends, 60 ms to fetch; an image asked 200 ms after the HTML was;
    /// the render 20 ms, once the CSS is in for 10 ms and the HTML is all in.
    fn five(load: Option<&str>) -> Page {
        let mut page = Page::parse(
            &serde_json::json!({
                "format": FORMAT, "name": "five",
                "activities": [
                    {"id": "html", "kind": "download", "request": 300, "response": 20000},
                    {"id": "parse", "kind": "compute", "ms": 50.0},
                    {"id": "css", "kind": "download", "request": 200, "response": 5000},
                    {"id": "img", "kind": "download", "response": 40000},
                    {"id": "render", "kind": "compute", "ms": 20}],
                "deps": [
                    {"after": "html", "then": "parse", "on": "first_byte"},
                    {"after": "parse", "then": "css"},
                    {"after": "html", "then": "img", "on": "start", "ms": 200.0},
                    {"after": "css", "then": "render", "on": "end", "ms": 10.0},
                    {"after": "html", "then": "render", "on": "end", "ms": 0.0}]
            })
            .to_string(),
        )
        .unwrap();
        page.load = load.map(str::to_string);
        page
    }

    /// Fake downloads: (ms from their start to the first byte, to the end), on tokio's paused
    /// clock; `fail` fails at its start.
    fn fake(fail: Option<&'static str>) -> impl Fn(&Activity, FirstByte) -> FakeFetch {
        move |a: &Activity, mut first_byte: FirstByte| -> FakeFetch {
            let (first, end) = match a.id.as_str() {
                "html" => (40, 100),
                "css" => (30, 60),
                _ => (50, 80),
            };
            let (start, fails) = (Instant::now(), fail == Some(a.id.as_str()));
            Box::pin(async move {
                if fails {
                    return Err("read after 0 bytes: reset".to_string());
                }
                tokio::time::sleep_until(start + Duration::from_millis(first)).await;
                first_byte.arrived();
                tokio::time::sleep_until(start + Duration::from_millis(end)).await;
                Ok(())
            })
        }
    }

    type FakeFetch = std::pin::Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

    fn rounded(t: Option<f64>) -> Option<f64> {
        t.map(f64::round)
    }

    #[tokio::test(start_paused = true)]
    async fn the_schedule_follows_the_graph_exactly() {
        for (load, load_ms) in [(Some("render"), 180.0), (None, 280.0)] {
            let page = five(load);
            let (mut report, mut bytes) = (page.report(), 0);
            replay(&page, fake(None), &mut report, &mut bytes)
                .await
                .unwrap();
            assert_eq!(bytes, page.app_bytes());
            assert_eq!(bytes, 20300 + 5200 + 40300);
            let got: Vec<_> = report
                .activities
                .iter()
                .map(|t| {
                    (
                        t.id.as_str(),
                        rounded(t.start_ms),
                        rounded(t.first_byte_ms),
                        rounded(t.end_ms),
                    )
                })
                .collect();
            // html 0-100, parse 40-90, css 90-150, img 200-280, render max(150 + 10, 100) to 180.
            let expected = [
                ("html", Some(0.0), Some(40.0), Some(100.0)),
                ("parse", Some(40.0), None, Some(90.0)),
                ("css", Some(90.0), Some(120.0), Some(150.0)),
                ("img", Some(200.0), Some(250.0), Some(280.0)),
                ("render", Some(160.0), None, Some(180.0)),
            ];
            assert_eq!(got, expected);
            assert_eq!(rounded(report.load_ms), Some(load_ms));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_download_names_itself_and_keeps_the_report() {
        let page = five(None);
        let (mut report, mut bytes) = (page.report(), 0);
        let err = replay(&page, fake(Some("img")), &mut report, &mut bytes)
            .await
            .unwrap_err();
        assert_eq!(err, "download img: read after 0 bytes: reset");
        let (html, img) = (&report.activities[0], &report.activities[3]);
        assert_eq!(
            (rounded(html.first_byte_ms), rounded(html.end_ms)),
            (Some(40.0), Some(100.0))
        );
        assert_eq!(
            (rounded(img.start_ms), img.first_byte_ms, img.end_ms),
            (Some(200.0), None, None)
        );
        assert_eq!(rounded(report.activities[4].end_ms), Some(180.0));
        // What ended before the failure: the HTML and the CSS.
        assert_eq!((report.load_ms, bytes), (None, 20300 + 5200));
    }

    /// A change to a good graph's JSON.
    type Edit = fn(&mut serde_json::Value);

    /// The error of a good graph after `edit`.
    fn error_of(edit: Edit) -> String {
        let mut graph = serde_json::json!({
            "format": FORMAT, "name": "two",
            "activities": [
                {"id": "a", "kind": "download", "request": 100, "response": 1000},
                {"id": "b", "kind": "compute", "ms": 5.0}],
            "deps": [{"after": "a", "then": "b", "on": "first_byte"}],
            "load": "b"
        });
        assert!(Page::parse(&graph.to_string()).is_ok());
        edit(&mut graph);
        Page::parse(&graph.to_string()).unwrap_err()
    }

    #[test]
    fn graphs_that_cannot_load_are_refused() {
        use serde_json::json;
        let cases: [(Edit, &str); 14] = [
            (
                |g| g["format"] = json!("epload"),
                "not a fecbench-page-1 graph",
            ),
            (|g| g["activities"] = json!([]), "no activity"),
            (
                |g| g["activities"][1]["id"] = json!("a"),
                "activity id \"a\" twice",
            ),
            (
                |g| g["activities"][0]["response"] = json!(0),
                "its response must be >= 1 byte",
            ),
            (
                |g| g["activities"][1]["ms"] = json!(-2),
                "compute \"b\": ms must be in [0, ",
            ),
            (
                |g| g["deps"][0]["then"] = json!("c"),
                "names \"c\", which is no activity",
            ),
            (
                |g| g["deps"][0]["on"] = json!("first"),
                "unknown variant `first`",
            ),
            (|g| g["deps"][0]["when"] = json!(1), "unknown field `when`"),
            (
                |g| g["deps"][0]["ms"] = json!(-1.0),
                "ms must be in [0, 86400000], not -1",
            ),
            (
                |g| g["deps"][0] = json!({"after": "b", "then": "a", "on": "first_byte"}),
                "\"a\" waits for the first byte of \"b\", a computation",
            ),
            (
                |g| {
                    g["deps"]
                        .as_array_mut()
                        .unwrap()
                        .push(json!({"after": "b", "then": "a"}))
                },
                "every activity waits for another: nothing can start",
            ),
            (
                |g| {
                    g["deps"]
                        .as_array_mut()
                        .unwrap()
                        .push(json!({"after": "b", "then": "b"}))
                },
                "a cycle of dependencies: b can never start",
            ),
            (
                |g| g["load"] = json!("z"),
                "the load activity \"z\" is no activity",
            ),
            (
                |g| g["activities"][0]["request"] = json!(-1),
                "invalid value: integer `-1`",
            ),
        ];
        for (edit, expected) in cases {
            let error = error_of(edit);
            assert!(error.contains(expected), "{error:?} lacks {expected:?}");
        }
    }
}
