//! Dimension-order routing (DOR) for meshes, tori and hypercubes.
//!
//! Every packet first corrects its coordinate in dimension 0, then in
//! dimension 1, and so on; on a ring dimension it goes the shorter way round
//! (the plus direction when both ways are equally long). The paths are
//! shortest paths.
//!
//! ## Finding the coordinates
//! OpenSM's `dor` takes dimensions from port numbers (lowest port = lowest
//! dimension), so it depends on cabling conventions. Here the shape comes
//! from the cabling alone: a mesh or torus is the *Cartesian product* of
//! paths and cycles, and its links fall into one class per factor by the
//! square rule (Imrich and Klavžar, "Product Graphs", ch. 23):
//! - two links that leave a switch towards different neighbours and lie on
//!   a common chordless 4-cycle (a "square") belong to different factors,
//!   and the *opposite* links of that square belong to the same factors;
//! - two links that leave a switch and share no chordless square (they go
//!   on in a straight line, or form a triangle) belong to the same factor.
//!
//! The transitive closure of these relations (a union-find over the links
//! of the simple switch graph, parallel cables merged) gives the classes. A
//! class whose links give every switch two neighbours is a ring dimension,
//! otherwise a line. The origin is the switch with the lowest GUID among
//! those at the end of every line (a corner of a mesh); its neighbour along
//! a line is the plus direction, along a ring its lower-GUID neighbour.
//! Coordinates then spread breadth-first, each switch's plus neighbours
//! found by completing squares with its predecessor's. Finally the result
//! is *verified*: every switch has distinct coordinates inside the box,
//! every link joins neighbours in its class's dimension and the box has
//! exactly that many links. Anything else is refused with
//! [`RoutingError::NotApplicable`] and the reason.
//!
//! ## Where the coordinates start
//! Routes depend on where each ring's coordinate 0 is (its dateline, its
//! ties), which way is plus, and the order of the dimensions. Decided by
//! one switch, the origin, they would all turn when that switch or a
//! neighbour of it is lost: every route and SL-to-VL table rewritten for
//! one switch gone. So they are voted on, and a switch gone changes at
//! most one vote per dimension:
//! - each ring puts coordinate 0 at its lowest-GUID switch and plus
//!   towards that switch's lower-GUID neighbour, each line puts 0 at its
//!   lower-GUID end; a dimension takes what a strict majority of its
//!   rings or lines chose, else keeps the origin's coordinates;
//! - each switch ranks the dimensions by the lowest port it cables along
//!   each (as OpenSM numbers dimensions), and each pair of dimensions goes
//!   the way most switches rank it. A pair too close to call for a switch
//!   and its neighbours (a 4-ring's two halves, cabled on ports 1 and 2
//!   alternately) goes as most of its planes' lowest-GUID switches rank
//!   it; a tie left goes by the origin's ports.
//!
//! Where GUIDs follow the cabling (consecutive along the rings, ports
//! numbered alike everywhere, as generated fabrics and most integrators
//! number them), every ring agrees, and the votes give the same
//! coordinates as the origin alone did: a whole fabric routes as before.
//! Where GUIDs are scattered, the rings disagree and the origin decides,
//! so a switch gone at the origin or next to it still turns the routes.
//!
//! A 4-ring is the product of two 2-switch lines (a 4×4 torus is a 4-D
//! hypercube), so it is found as such: shortest paths stay shortest and need
//! no dateline. A 3-ring needs none either (every in-ring hop is a whole
//! path segment).
//!
//! ## Deadlock freedom
//! Paths only turn from a lower to a higher dimension and never reverse, so
//! a channel dependency cycle on one VL must stay inside one ring and run
//! round it in one direction. On a mesh there are no rings: one VL
//! suffices. On a torus each ring dimension of 5 or more switches has a
//! *dateline*, the cable between coordinates k−1 and 0 (k the ring size).
//! Two VLs suffice, as in OpenSM's torus-2QoS: the VL changes inside the
//! fabric through per-(input port, output port) SL-to-VL tables
//! ([`HopVls`]).
//!
//! - A path's SL is the bitmask of the datelines it crosses (bit i for the
//!   i-th dimension with a dateline), so at most 4 such dimensions fit the
//!   16 SLs; more is refused with [`RoutingError::NotApplicable`].
//! - A hop leaving switch c (coordinate x in ring dimension d) by a
//!   ring-d cable rides VL 1 when the SL has d's bit and the hop is the
//!   dateline hop or comes after it; otherwise VL 0. Mesh dimensions, hops
//!   to end ports and every CA use VL 0.
//! - Paths go the shorter way (ties: plus), so a crossing path has length
//!   ℓ ≤ ⌊k/2⌋ in the ring. Plus-wards from s to t (t < s): the pre-dateline
//!   hops leave x ∈ [s, k−2] with s = t + k − ℓ ≥ ⌈k/2⌉, the dateline hop
//!   leaves k−1, the post-dateline ones leave x ∈ [0, t−1] with t ≤ ℓ−1, so
//!   x ≤ ⌊k/2⌋−2. Hence "after the dateline" is *x = k−1 or 2x < k*, known
//!   from the coordinate alone. Minus-wards (a crossing path is strictly
//!   shorter than k/2, ties go plus): pre-dateline hops leave x ∈ [1, s]
//!   with 2x < k, the dateline hop leaves 0, post-dateline ones leave
//!   x ≥ t+1 > k/2: *x = 0 or 2x ≥ k*. So the table of (switch, out port)
//!   depends on the switch's coordinate, the port's dimension and direction
//!   and the SL, never on the input port.
//! - Acyclic: within one ring and direction, VL 0 never holds the dateline
//!   cable (crossing paths are on VL 0 only before it, the others never
//!   take it), so its dependencies follow the line 0 → 1 → … → k−1 and
//!   cannot close. VL 1 holds the dateline cable and post-dateline hops,
//!   which leave x ≤ ⌊k/2⌋−2 < k−2 plus-wards (x ≥ ⌊k/2⌋+1 > 1
//!   minus-wards), so the cable leaving k−2 (minus-wards: 1) is never on
//!   VL 1 and the ring is not closed either. Along a path the pair
//!   (dimension, VL) never decreases: VL goes 0 → 1 at most once per
//!   dimension and dimensions only grow. Ordering channels by (dimension,
//!   VL) and then along each ring's open line orders every dependency, so
//!   the whole (channel, VL) dependency graph is acyclic.
//! - 3-rings need no dateline (every in-ring path segment is one hop) and
//!   4-rings are detected as two 2-switch lines, so a torus whose rings are
//!   all 3 or 4 long, like a mesh, uses one VL and no tables.
//!
//! [`RoutingError::TooFewVls`] (needed 2) refuses a torus with datelines
//! when only one VL is available.
//!
//! ## Cables missing
//! A torus that loses a cable still routes in dimension order: the ring
//! the cable closed is now a line, and the paths along it go the way round
//! that still has its cables. Routing does not change anywhere else, so a
//! cable down moves only the routes that crossed it, and the routes are a
//! function of the fabric alone (a restart, or another SM, routes the
//! degraded torus the same way).
//! - Finding the shape: every switch of a torus has two neighbours per
//!   dimension, so each missing cable leaves its two ends one neighbour
//!   short of the rest. When plain detection fails, the short switches are
//!   paired up (at most [`MAX_MISSING`] cables; only pairs not cabled and
//!   within three hops, as two ends of one cable are round a square), the
//!   pairs added as uncabled neighbours, and detection runs on that. It is
//!   taken if it finds a grid where each added pair lies on a ring and no
//!   ring has two: a line missing a cable, or a ring missing two, is cut
//!   in two, and a dimension order cannot cross the cut. [`Shape::missing`]
//!   names the pairs.
//! - Deadlock freedom: a path along an opened ring takes no dateline bit,
//!   so it stays on VL 0 there; no other path uses that ring's cables
//!   (a path corrects each dimension on one ring), so the ring's VL 1 is
//!   empty and its VL 0 dependencies follow the line from the gap round to
//!   the gap, which never closes. The order by (dimension, VL) and then
//!   along each ring's open line still orders every dependency, opened
//!   rings ordered from their gap instead of their dateline.
//!
//! ## A switch gone
//! A torus or hypercube that loses one switch (its hosts with it) still
//! routes in dimension order, with one turn against the order where a path
//! would have turned at the hole, as OpenSM's torus-2QoS does.
//! - Finding the shape: the hole's neighbours are each one neighbour short
//!   of every other switch, and there are as many of them as a switch has
//!   neighbours. A switch is added back cabled to them (its GUID the
//!   highest, so it is never the origin) and detection runs on that
//!   ([`Shape::hole`]). A mesh is not taken: its lines end, so its short
//!   switches are not the hole's alone, and a hole cuts a line in two.
//! - The rings through the hole are lines now, routed like a ring a cable
//!   opened: the way that does not cross the hole, with no dateline bit.
//! - A path whose next hop would be the hole turns there into the next
//!   dimension it corrects (the shorter way from the hole), one hop early.
//!   The switch it reaches corrects the first dimension again, one hop
//!   into the switch beyond the hole, against the order; from there the
//!   path goes on as before the loss. Every switch's hop is still a
//!   function of where it is and the destination, so the tables hold it.
//! - Deadlock freedom: the hop after the turn against the order rides a VL
//!   class of its own ([`Shape::detour_vl`], the VL above the dateline's),
//!   set in the SL-to-VL tables of the port pairs those turns take, so dor
//!   needs twice its VLs round a hole (4 on a torus with datelines). The
//!   order by (dimension, VL) holds everywhere else. A dependency can go
//!   back down the order only through such a turn, and from there the path
//!   runs along the hole's ring of its next dimension, which is not the
//!   ring of any early hop (that leaves a neighbour of the hole in another
//!   dimension): no cycle closes. The unit tests check every hole of
//!   several tori per hop.
//! - The routes that did not go through the hole stay, the origin's and
//!   its neighbours' included where the rings agree on where the
//!   coordinates start (see "Where the coordinates start").
//!
//! ## Parallel cables
//! Between two neighbours the route to each LID takes the least loaded of
//! the parallel cables, a route to an end port charging it one plus the
//! number of end ports whose traffic it carries (as [`mod@crate::minhop`]).
//!
//! ## Cost
//! With S switches, E links, degree at most 2D for D dimensions: shape
//! detection O(S·D³) after a degree check that refuses high-radix fabrics
//! (fat trees) in O(S + E), times the pairings tried when cables are
//! missing (at most 128); routing O(S²·D + L·S) for L
//! destination LIDs, O(S²·D²) with cables missing.

use crate::error::RoutingError;
use crate::fabric::{PortEnd, RoutingFabric, SwitchId};
use crate::lft::{HopVls, Lft, PathSl, Routes, SL_COUNT};
use crate::options::EngineOptions;

const NONE: u32 = u32::MAX;
const ENGINE: &str = "dor";

/// One dimension of a detected shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dim {
    /// Switches along the dimension.
    pub size: u32,
    /// The last switch is cabled back to the first.
    pub ring: bool,
}

impl Dim {
    /// Whether paths that cross the wrap-around cable need their own VL:
    /// rings of five or more (a 3-ring has no in-ring dependencies; a 4-ring
    /// is detected as two lines).
    pub fn has_dateline(&self) -> bool {
        self.ring && self.size >= 4
    }
}

/// The mesh, torus or hypercube one connected part of a fabric forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// Dimensions in routing order.
    pub dims: Vec<Dim>,
    /// The switches of the part.
    pub switches: Vec<SwitchId>,
    /// `coords[i * dims.len() + k]` is coordinate `k` of `switches[i]`.
    pub coords: Vec<u32>,
    /// Neighbour pairs of the grid with no cable between them (see
    /// "Cables missing" in the module documentation), by switch.
    pub missing: Vec<(SwitchId, SwitchId)>,
    /// The grid coordinates of a switch gone from a torus or hypercube
    /// (see "A switch gone" in the module documentation).
    pub hole: Option<Vec<u32>>,
}

impl Shape {
    /// Coordinates of the `i`-th switch of the part.
    pub fn coord(&self, i: usize) -> &[u32] {
        let d = self.dims.len();
        &self.coords[i * d..(i + 1) * d]
    }

    /// Each missing cable as the ring it opens: its dimension, the grid
    /// coordinates of the ring's coordinate-0 switch, and the coordinate
    /// the cable leaves plus-wards. `None` for a pair that is no ring's
    /// neighbours (a line's, or no grid neighbours at all).
    fn opened_rings(&self) -> Vec<Option<OpenedRing>> {
        let d = self.dims.len();
        let index: std::collections::HashMap<SwitchId, usize> =
            self.switches.iter().enumerate().map(|(i, &s)| (s, i)).collect();
        self.missing
            .iter()
            .map(|&(a, b)| {
                let (ca, cb) = (self.coord(*index.get(&a)?), self.coord(*index.get(&b)?));
                let dim = (0..d).find(|&k| ca[k] != cb[k])?;
                if !self.dims[dim].ring {
                    return None;
                }
                let from = if (ca[dim] + 1) % self.dims[dim].size == cb[dim] { ca[dim] } else { cb[dim] };
                let mut ring = ca.to_vec();
                ring[dim] = 0;
                Some(OpenedRing { dim, ring, from })
            })
            .collect()
    }

    /// Dimensions whose datelines take an SL bit.
    pub fn datelines(&self) -> usize {
        self.dims.iter().filter(|d| d.has_dateline()).count()
    }

    /// VLs deadlock freedom needs: 2 with datelines (switched per hop),
    /// else 1; twice that round a switch gone, whose detours take a VL
    /// class of their own for one hop ([`Shape::detour_vl`]).
    pub fn vls_needed(&self) -> u32 {
        let plain = if self.datelines() == 0 { 1 } else { 2 };
        if self.hole.is_some() {
            2 * plain
        } else {
            plain
        }
    }

    /// The VL bit of the hop after a detour's turn against the dimension
    /// order: above the dateline bit when there are datelines.
    pub fn detour_vl(&self) -> u8 {
        if self.datelines() == 0 {
            1
        } else {
            2
        }
    }

    /// "4x4x4 torus", "2x2x2 mesh", "5x3 mesh/torus" (mixed: `r` marks rings).
    pub fn describe(&self) -> String {
        if self.dims.is_empty() {
            return "single switch".into();
        }
        let all_ring = self.dims.iter().all(|d| d.ring);
        let no_ring = self.dims.iter().all(|d| !d.ring);
        let sizes: Vec<String> = self
            .dims
            .iter()
            .map(|d| if d.ring && !all_ring { format!("{}r", d.size) } else { d.size.to_string() })
            .collect();
        let kind = if all_ring {
            "torus"
        } else if no_ring && self.dims.iter().all(|d| d.size == 2) {
            "hypercube"
        } else if no_ring {
            "mesh"
        } else {
            "mesh/torus"
        };
        let shape = format!("{} {kind}", sizes.join("x"));
        if self.hole.is_some() {
            return format!("{shape} with 1 switch missing");
        }
        match self.missing.len() {
            0 => shape,
            1 => format!("{shape} with 1 cable missing"),
            m => format!("{shape} with {m} cables missing"),
        }
    }
}

/// A ring of a [`Shape`] that a missing cable made a line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OpenedRing {
    dim: usize,
    /// The coordinates of the ring's switch at coordinate 0 of `dim`.
    ring: Vec<u32>,
    /// The cable missing runs from this coordinate to the next.
    from: u32,
}

/// The simple switch graph of one connected part: local indices, sorted
/// neighbour lists with link ids.
#[derive(Clone)]
struct Simple {
    nodes: Vec<SwitchId>,
    /// `adj[v]` = (neighbour, link id), sorted by neighbour.
    adj: Vec<Vec<(u32, u32)>>,
    links: Vec<(u32, u32)>,
    /// Link ids of the neighbour pairs added where no cable runs.
    extra: Vec<u32>,
    /// The index of a switch added where one is gone (the last node; its
    /// entry in `nodes` is a stand-in that is never looked up).
    hole: Option<u32>,
}

impl Simple {
    /// The part's switches `nodes` (`local`: fabric switch index → index
    /// in `nodes`), linked as cabled, plus the uncabled pairs `added`.
    fn build(f: &RoutingFabric, nodes: Vec<SwitchId>, local: &[u32], added: &[(u32, u32)]) -> Simple {
        let mut adj: Vec<Vec<(u32, u32)>> = Vec::with_capacity(nodes.len());
        let mut links = Vec::new();
        for (v, &s) in nodes.iter().enumerate() {
            let mut ns: Vec<u32> =
                f.switch_neighbors(s).iter().map(|e| local[e.neighbor.index()]).filter(|&n| n != v as u32).collect();
            for &(a, b) in added {
                if a == v as u32 {
                    ns.push(b);
                } else if b == v as u32 {
                    ns.push(a);
                }
            }
            ns.sort_unstable();
            ns.dedup();
            adj.push(ns.into_iter().map(|n| (n, NONE)).collect());
        }
        for v in 0..adj.len() {
            for i in 0..adj[v].len() {
                let n = adj[v][i].0 as usize;
                if n > v {
                    let id = links.len() as u32;
                    links.push((v as u32, n as u32));
                    adj[v][i].1 = id;
                    let j = adj[n].binary_search_by_key(&(v as u32), |x| x.0).expect("symmetric");
                    adj[n][j].1 = id;
                }
            }
        }
        let mut extra: Vec<u32> = added.iter().filter_map(|&(a, b)| Simple::find(&adj, a, b)).collect();
        extra.sort_unstable();
        extra.dedup();
        Simple { nodes, adj, links, extra, hole: None }
    }

    /// The graph with one switch added, cabled to `neighbours`: the switch
    /// gone from their midst.
    fn with_hole(&self, neighbours: &[u32]) -> Simple {
        let mut g = self.clone();
        let v = g.nodes.len() as u32;
        g.nodes.push(g.nodes[0]);
        g.adj.push(Vec::with_capacity(neighbours.len()));
        for &w in neighbours {
            let id = g.links.len() as u32;
            g.links.push((w, v));
            let at = g.adj[w as usize].partition_point(|x| x.0 < v);
            g.adj[w as usize].insert(at, (v, id));
            g.adj[v as usize].push((w, id));
        }
        g.adj[v as usize].sort_unstable();
        g.hole = Some(v);
        g
    }

    fn find(adj: &[Vec<(u32, u32)>], a: u32, b: u32) -> Option<u32> {
        let l = &adj[a as usize];
        l.binary_search_by_key(&b, |x| x.0).ok().map(|i| l[i].1)
    }

    fn link(&self, a: u32, b: u32) -> Option<u32> {
        Simple::find(&self.adj, a, b)
    }
}

struct UnionFind(Vec<u32>);

impl UnionFind {
    fn find(&mut self, mut x: u32) -> u32 {
        while self.0[x as usize] != x {
            let p = self.0[x as usize];
            self.0[x as usize] = self.0[p as usize];
            x = p;
        }
        x
    }
    fn union(&mut self, a: u32, b: u32) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            self.0[a.max(b) as usize] = a.min(b);
        }
    }
}

fn not_applicable(reason: String) -> RoutingError {
    RoutingError::NotApplicable { engine: ENGINE, reason }
}

/// Detects the shape of every connected part of the switch graph (parts
/// without switches are skipped). See the module documentation for the
/// method; the error names the first part that is no mesh, torus or
/// hypercube and why.
pub fn shapes(f: &RoutingFabric) -> Result<Vec<Shape>, RoutingError> {
    let mut local = vec![NONE; f.num_switches()];
    let mut out = Vec::new();
    for root in f.switch_ids() {
        if local[root.index()] != NONE {
            continue;
        }
        // Breadth-first over switch-to-switch cables.
        let mut nodes = vec![root];
        local[root.index()] = 0;
        let mut head = 0;
        while head < nodes.len() {
            let u = nodes[head];
            head += 1;
            for e in f.switch_neighbors(u) {
                if local[e.neighbor.index()] == NONE {
                    local[e.neighbor.index()] = nodes.len() as u32;
                    nodes.push(e.neighbor);
                }
            }
        }
        let g = Simple::build(f, nodes, &local, &[]);
        let shape = match detect(f, g.clone(), &local) {
            Ok(shape) => shape,
            Err(whole) => detect_with_gaps(f, &g, &local).or_else(|| detect_with_hole(f, &g, &local)).ok_or(whole)?,
        };
        out.push(shape);
    }
    Ok(out)
}

/// Most cables a part may miss and still be routed in dimension order.
pub const MAX_MISSING: usize = 4;

/// Most completions [`detect_with_gaps`] tries: the ways to pair up eight
/// cable ends are 105, and the distance rule leaves far fewer.
const MAX_COMPLETIONS: usize = 128;

/// A torus with cables missing: the part as it would be with uncabled
/// neighbour pairs added back, when that is a grid whose missing cables
/// each open a ring and leave every ring whole but for one. `None` when no
/// such completion exists (see "Cables missing" in the module
/// documentation).
fn detect_with_gaps(f: &RoutingFabric, g: &Simple, local: &[u32]) -> Option<Shape> {
    let n = g.nodes.len();
    let top = g.adj.iter().map(Vec::len).max()?;
    // A ring switch's neighbours: two per dimension, the same at every
    // switch; each missing cable takes one from both of its ends.
    let mut ends: Vec<u32> = Vec::new();
    for v in 0..n {
        for _ in g.adj[v].len()..top {
            ends.push(v as u32);
        }
    }
    if ends.is_empty() || ends.len() % 2 == 1 || ends.len() > 2 * MAX_MISSING || n < 5 {
        return None;
    }
    // Two ends of one missing cable in a grid of rings are three hops
    // apart round a square (two round a 3-ring).
    let near = |a: u32, b: u32| -> bool {
        let mut seen = vec![a];
        let mut layer = vec![a];
        for _ in 0..3 {
            let mut next = Vec::new();
            for &u in &layer {
                for &(w, _) in &g.adj[u as usize] {
                    if w == b {
                        return true;
                    }
                    if !seen.contains(&w) {
                        seen.push(w);
                        next.push(w);
                    }
                }
            }
            layer = next;
        }
        false
    };
    let mut tried = 0;
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    let mut used = vec![false; ends.len()];
    complete(&ends, &mut used, &mut pairs, &mut tried, &|a, b| g.link(a, b).is_none() && near(a, b), &mut |pairs| {
        let shape = detect(f, Simple::build(f, g.nodes.clone(), local, pairs), local).ok()?;
        gaps_are_routable(&shape).then_some(shape)
    })
}

/// A torus or hypercube with one switch gone: the part as it would be
/// with a switch added back, cabled to every switch a neighbour short.
/// Taken when every switch but those has the same number of neighbours,
/// those have one fewer and there are as many of them, and the grid found
/// has no line longer than two switches (a mesh's line is cut in two by
/// its hole). `None` otherwise (see "A switch gone" in the module
/// documentation).
fn detect_with_hole(f: &RoutingFabric, g: &Simple, local: &[u32]) -> Option<Shape> {
    let n = g.nodes.len();
    let top = g.adj.iter().map(Vec::len).max()?;
    let short: Vec<u32> = (0..n as u32).filter(|&v| g.adj[v as usize].len() < top).collect();
    if n < 3 || short.len() != top || short.iter().any(|&v| g.adj[v as usize].len() + 1 != top) {
        return None;
    }
    let shape = detect(f, g.with_hole(&short), local).ok()?;
    shape.dims.iter().all(|dim| dim.ring || dim.size == 2).then_some(shape)
}

/// Uncabled neighbour pairs, by index in the part.
type Pairing = [(u32, u32)];

/// Pairs up the unused entries of `ends` in every way `fits` allows,
/// first found first, until `found` accepts one (at most
/// [`MAX_COMPLETIONS`] complete pairings are offered).
fn complete(
    ends: &[u32],
    used: &mut [bool],
    pairs: &mut Vec<(u32, u32)>,
    tried: &mut usize,
    fits: &dyn Fn(u32, u32) -> bool,
    found: &mut dyn FnMut(&Pairing) -> Option<Shape>,
) -> Option<Shape> {
    let Some(i) = used.iter().position(|&u| !u) else {
        *tried += 1;
        return found(pairs);
    };
    used[i] = true;
    for j in i + 1..ends.len() {
        if *tried >= MAX_COMPLETIONS {
            break;
        }
        let (a, b) = (ends[i], ends[j]);
        let pair = (a.min(b), a.max(b));
        if used[j] || a == b || pairs.contains(&pair) || !fits(a, b) {
            continue;
        }
        used[j] = true;
        pairs.push(pair);
        let done = complete(ends, used, pairs, tried, fits, found);
        pairs.pop();
        used[j] = false;
        if done.is_some() {
            used[i] = false;
            return done;
        }
    }
    used[i] = false;
    None
}

/// Whether every missing cable of `shape` lies on a ring, at most one to a
/// ring: the ring is then a line, routed the way round that still has its
/// cables. A line missing a cable is cut in two, which no dimension order
/// crosses.
fn gaps_are_routable(shape: &Shape) -> bool {
    let mut opened: Vec<OpenedRing> = Vec::new();
    for ring in shape.opened_rings() {
        match ring {
            Some(r) if !opened.iter().any(|o| (o.dim, &o.ring) == (r.dim, &r.ring)) => opened.push(r),
            _ => return false,
        }
    }
    true
}

fn detect(f: &RoutingFabric, g: Simple, local: &[u32]) -> Result<Shape, RoutingError> {
    let n = g.nodes.len();
    // The switch added for one gone is never the origin, and the origin's
    // plus neighbour is the other one where it could be.
    let guid = |v: u32| if g.hole == Some(v) { u64::MAX } else { f.switch(g.nodes[v as usize]).guid };
    if n == 1 {
        return Ok(Shape { dims: Vec::new(), switches: g.nodes, coords: Vec::new(), missing: Vec::new(), hole: None });
    }
    // Every factor has at least two switches, so there are at most log2(n)
    // of them and a switch has at most two neighbours per factor.
    let max_dims = (usize::BITS - 1 - n.leading_zeros()) as usize;
    if let Some(v) = (0..n).find(|&v| g.adj[v].len() > 2 * max_dims) {
        return Err(not_applicable(format!(
            "switch {:#018x} has {} switch neighbours; a mesh or torus of {n} switches has at most {}",
            guid(v as u32),
            g.adj[v].len(),
            2 * max_dims
        )));
    }

    // Link classes by the square rule.
    let mut uf = UnionFind((0..g.links.len() as u32).collect());
    let mut common = Vec::new();
    for v in 0..n as u32 {
        let adj = &g.adj[v as usize];
        for i in 0..adj.len() {
            for j in i + 1..adj.len() {
                let ((a, ea), (b, eb)) = (adj[i], adj[j]);
                if g.link(a, b).is_some() {
                    uf.union(ea, eb);
                    continue;
                }
                common.clear();
                let (la, lb) = (&g.adj[a as usize], &g.adj[b as usize]);
                let (mut x, mut y) = (0, 0);
                while x < la.len() && y < lb.len() {
                    match la[x].0.cmp(&lb[y].0) {
                        std::cmp::Ordering::Less => x += 1,
                        std::cmp::Ordering::Greater => y += 1,
                        std::cmp::Ordering::Equal => {
                            let w = la[x].0;
                            if w != v && g.link(v, w).is_none() {
                                common.push((w, la[x].1, lb[y].1));
                            }
                            x += 1;
                            y += 1;
                        }
                    }
                }
                if common.is_empty() {
                    uf.union(ea, eb);
                }
                for &(_, eaw, ebw) in &common {
                    uf.union(ea, ebw);
                    uf.union(eb, eaw);
                }
            }
        }
    }
    let mut class_of_root = vec![NONE; g.links.len()];
    let mut class = vec![0u32; g.links.len()];
    let mut nclass = 0u32;
    for l in 0..g.links.len() as u32 {
        let r = uf.find(l) as usize;
        if class_of_root[r] == NONE {
            class_of_root[r] = nclass;
            nclass += 1;
        }
        class[l as usize] = class_of_root[r];
    }
    let d = nclass as usize;
    if d > max_dims {
        return Err(not_applicable(format!(
            "the links fall into {d} dimension classes, more than {max_dims} for {n} switches"
        )));
    }

    // Per switch and class: neighbours (at most two).
    let mut cn: Vec<[u32; 2]> = vec![[NONE; 2]; n * d];
    for v in 0..n {
        for &(w, l) in &g.adj[v] {
            let slot = &mut cn[v * d + class[l as usize] as usize];
            if slot[0] == NONE {
                slot[0] = w;
            } else if slot[1] == NONE {
                slot[1] = w;
            } else {
                return Err(not_applicable(format!(
                    "switch {:#018x} has more than two neighbours along one dimension",
                    guid(v as u32)
                )));
            }
        }
    }
    let deg = |v: usize, k: usize| cn[v * d + k].iter().filter(|&&x| x != NONE).count();
    if let Some(v) = (0..n).find(|&v| (0..d).any(|k| deg(v, k) == 0)) {
        return Err(not_applicable(format!(
            "switch {:#018x} has no neighbour along some dimension; not a product of lines and rings",
            guid(v as u32)
        )));
    }
    let ring: Vec<bool> = (0..d).map(|k| (0..n).all(|v| deg(v, k) == 2)).collect();
    let origin = (0..n)
        .filter(|&v| (0..d).all(|k| ring[k] || deg(v, k) == 1))
        .min_by_key(|&v| guid(v as u32))
        .ok_or_else(|| not_applicable("no switch sits at the end of every line dimension (no mesh corner)".into()))?;

    // Plus neighbour of the origin per class, and the class sizes.
    let mut size = vec![0u32; d];
    let mut plus0 = vec![NONE; d];
    for k in 0..d {
        let [a, b] = cn[origin * d + k];
        plus0[k] = if b == NONE || guid(a) < guid(b) { a } else { b };
        let (mut prev, mut cur, mut len) = (origin as u32, plus0[k], 1u32);
        while cur != NONE && cur != origin as u32 {
            len += 1;
            if len as usize > n {
                return Err(not_applicable("a dimension does not close or end".into()));
            }
            let [x, y] = cn[cur as usize * d + k];
            let next = if x == prev { y } else { x };
            prev = cur;
            cur = next;
        }
        if ring[k] != (cur == origin as u32) {
            return Err(not_applicable("a dimension is a ring in one place and a line in another".into()));
        }
        size[k] = len;
    }

    // Coordinates and plus neighbours (indexed by class), breadth-first.
    let mut coord = vec![NONE; n * d];
    let mut plus = vec![NONE; n * d];
    coord[origin * d..(origin + 1) * d].fill(0);
    plus[origin * d..(origin + 1) * d].copy_from_slice(&plus0);
    let mut queue = vec![origin as u32];
    let mut head = 0;
    let bad = |v: u32| not_applicable(format!("switch {:#018x} breaks the grid structure", guid(v)));
    while head < queue.len() {
        let u = queue[head] as usize;
        head += 1;
        for &(w, l) in &g.adj[u] {
            let j = class[l as usize] as usize;
            let forward = plus[u * d + j] == w;
            let mut c: Vec<u32> = coord[u * d..(u + 1) * d].to_vec();
            c[j] = if forward {
                (c[j] + 1) % size[j]
            } else if c[j] == 0 {
                if !ring[j] {
                    return Err(bad(w));
                }
                size[j] - 1
            } else {
                c[j] - 1
            };
            let wi = w as usize;
            if coord[wi * d] != NONE {
                if coord[wi * d..(wi + 1) * d] != c[..] {
                    return Err(bad(w));
                }
                continue;
            }
            coord[wi * d..(wi + 1) * d].copy_from_slice(&c);
            for k in 0..d {
                plus[wi * d + k] = if k == j {
                    if forward {
                        // Along the same class: the neighbour other than u.
                        let [x, y] = cn[wi * d + k];
                        if x == u as u32 {
                            y
                        } else {
                            x
                        }
                    } else {
                        u as u32
                    }
                } else {
                    let pu = plus[u * d + k];
                    if pu == NONE {
                        NONE
                    } else {
                        // Complete the square u, w, ?, plus_k(u).
                        let [x, y] = cn[wi * d + k];
                        let hit = [x, y].into_iter().find(|&t| t != NONE && t != u as u32 && g.link(t, pu).is_some());
                        hit.ok_or_else(|| bad(w))?
                    }
                };
            }
            queue.push(w);
        }
    }

    // Verification: a bijection onto the box, links exactly the box's.
    let total: u64 = size.iter().map(|&s| u64::from(s)).product();
    if total != n as u64 || queue.len() != n {
        return Err(not_applicable(format!(
            "{n} switches do not fill a {} box",
            size.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("x")
        )));
    }
    let mut seen = vec![false; n];
    for v in 0..n {
        let mut idx = 0usize;
        for k in (0..d).rev() {
            let c = coord[v * d + k];
            if c >= size[k] {
                return Err(bad(v as u32));
            }
            idx = idx * size[k] as usize + c as usize;
        }
        if std::mem::replace(&mut seen[idx], true) {
            return Err(bad(v as u32));
        }
    }
    for &(a, b) in &g.links {
        let (a, b) = (a as usize, b as usize);
        let k = class[g.link(a as u32, b as u32).expect("listed") as usize] as usize;
        for j in 0..d {
            let (ca, cb) = (coord[a * d + j], coord[b * d + j]);
            let ok = if j != k {
                ca == cb
            } else {
                let diff = ca.abs_diff(cb);
                diff == 1 || (ring[k] && diff == size[k] - 1)
            };
            if !ok {
                return Err(bad(a as u32));
            }
        }
    }
    let expected: u64 = (0..d)
        .map(|k| {
            let per_fiber = if ring[k] { size[k] } else { size[k] - 1 };
            total / u64::from(size[k]) * u64::from(per_fiber)
        })
        .sum();
    if expected != g.links.len() as u64 {
        return Err(not_applicable(format!(
            "{} neighbour pairs are cabled, a full grid of this shape has {expected}",
            g.links.len()
        )));
    }

    orient_by_vote(&g, &guid, &size, &ring, &mut coord);
    let order = order_by_ports(f, &g, local, &class, &coord, &guid, origin);
    let mut rank = vec![0usize; d];
    for (r, &k) in order.iter().enumerate() {
        rank[k] = r;
    }
    let dims = order.iter().map(|&k| Dim { size: size[k], ring: ring[k] }).collect();
    let in_order = |v: usize| {
        let mut c = vec![0u32; d];
        for k in 0..d {
            c[rank[k]] = coord[v * d + k];
        }
        c
    };
    let real = |v: &usize| g.hole != Some(*v as u32);
    let coords = (0..n).filter(real).flat_map(in_order).collect();
    let missing = g.extra.iter().map(|&l| {
        let (a, b) = g.links[l as usize];
        (g.nodes[a as usize], g.nodes[b as usize])
    });
    let missing = missing.collect();
    let hole = g.hole.map(|v| in_order(v as usize));
    let switches = (0..n).filter(real).map(|v| g.nodes[v]).collect();
    Ok(Shape { dims, switches, coords, missing, hole })
}

/// Moves each dimension's coordinate 0 and plus direction to where most
/// of its rings (or lines) agree, so that losing a switch moves no
/// coordinate (see "Where the coordinates start" in the module
/// documentation).
///
/// A ring votes for its lowest-GUID switch as coordinate 0 and for its
/// lower-GUID neighbour of that switch as the plus side; a line for its
/// lower-GUID end as 0. A switch added for one gone has no GUID of its
/// own (`guid` gives it the highest) and never casts a vote. A dimension
/// whose rings or lines give no strict majority keeps the coordinates
/// detection gave it, from the origin.
fn orient_by_vote(g: &Simple, guid: &dyn Fn(u32) -> u64, size: &[u32], ring: &[bool], coord: &mut [u32]) {
    let n = g.nodes.len();
    let d = size.len();
    for k in 0..d {
        let s = size[k] as usize;
        // `at[fiber * s + x]`: the GUID at coordinate x of the fiber (the
        // ring or line along k through the other coordinates).
        let mut at = vec![u64::MAX; n];
        let fiber = |v: usize| {
            (0..d).filter(|&j| j != k).fold(0usize, |acc, j| acc * size[j] as usize + coord[v * d + j] as usize)
        };
        for v in 0..n {
            at[fiber(v) * s + coord[v * d + k] as usize] =
                if g.hole == Some(v as u32) { u64::MAX } else { guid(v as u32) };
        }
        // Votes as (new coordinate 0, reversed).
        let mut votes: Vec<((usize, bool), usize)> = Vec::new();
        for line in at.chunks(s) {
            let vote = if ring[k] {
                let Some(low) = (0..s).filter(|&x| line[x] != u64::MAX).min_by_key(|&x| line[x]) else {
                    continue;
                };
                (low, line[(low + s - 1) % s] < line[(low + 1) % s])
            } else if line[s - 1] < line[0] {
                (s - 1, true)
            } else {
                (0, false)
            };
            match votes.iter_mut().find(|(v, _)| *v == vote) {
                Some((_, count)) => *count += 1,
                None => votes.push((vote, 1)),
            }
        }
        let Some(&((zero, reversed), count)) = votes.iter().max_by_key(|(_, count)| *count) else {
            continue;
        };
        if 2 * count <= n / s {
            continue;
        }
        for v in 0..n {
            let x = coord[v * d + k] as usize;
            let moved = if reversed { (zero + s - x) % s } else { (x + s - zero) % s };
            coord[v * d + k] = moved as u32;
        }
    }
}

/// Dimension order by port numbers, as OpenSM numbers dimensions, decided
/// so that no single switch (the origin, or one gone) decides it.
///
/// Each pair of classes is ordered by the switches' votes: a switch puts
/// first the class it cables on its lower port. A pair whose votes are
/// too close for a switch gone and its neighbours to leave them standing
/// (a 4-ring's two halves, cabled on ports 1 and 2 alternately) is
/// ordered by its planes instead: each plane of the two classes votes as
/// its lowest-GUID switch does. The classes go in order of the pairs
/// they win; ties, which only inconsistent preferences leave, by the
/// origin's lowest port.
fn order_by_ports(
    f: &RoutingFabric,
    g: &Simple,
    local: &[u32],
    class: &[u32],
    coord: &[u32],
    guid: &dyn Fn(u32) -> u64,
    origin: usize,
) -> Vec<usize> {
    let d = coord.len() / g.nodes.len();
    let n = g.nodes.len();
    let first_ports = |v: usize| {
        let mut first = vec![u8::MAX; d];
        if g.hole == Some(v as u32) {
            return first;
        }
        for e in f.switch_neighbors(g.nodes[v]) {
            if let Some(l) = g.link(v as u32, local[e.neighbor.index()]) {
                let k = class[l as usize] as usize;
                first[k] = first[k].min(e.port);
            }
        }
        first
    };
    let firsts: Vec<Vec<u8>> = (0..n).map(first_ports).collect();
    // A switch gone takes its vote and may turn those of its neighbours.
    let spread = 2 * (2 * d + 1) as i64;
    let mut wins = vec![0usize; d];
    for a in 0..d {
        for b in a + 1..d {
            let mut margin = 0i64;
            for first in &firsts {
                if first[a] != u8::MAX && first[b] != u8::MAX {
                    margin += (first[a] < first[b]) as i64 - (first[b] < first[a]) as i64;
                }
            }
            if margin.abs() <= spread {
                margin = plane_votes(g, guid, coord, &firsts, a, b);
            }
            if margin == 0 {
                margin =
                    (firsts[origin][a] < firsts[origin][b]) as i64 - (firsts[origin][b] < firsts[origin][a]) as i64;
            }
            wins[if margin >= 0 { a } else { b }] += 1;
        }
    }
    let mut order: Vec<usize> = (0..d).collect();
    order.sort_by_key(|&k| (std::cmp::Reverse(wins[k]), firsts[origin][k], k));
    order
}

/// The planes of classes a and b, each voting +1 when its lowest-GUID
/// switch cables class a on a lower port than class b (`firsts`: each
/// switch's lowest port per class), -1 the other way. A switch added
/// for one gone is no plane's lowest.
fn plane_votes(g: &Simple, guid: &dyn Fn(u32) -> u64, coord: &[u32], firsts: &[Vec<u8>], a: usize, b: usize) -> i64 {
    let d = firsts.first().map_or(0, Vec::len);
    let mut lowest: std::collections::HashMap<Vec<u32>, usize> = std::collections::HashMap::new();
    for v in (0..g.nodes.len()).filter(|&v| g.hole != Some(v as u32)) {
        let mut key = coord[v * d..(v + 1) * d].to_vec();
        key[a] = NONE;
        key[b] = NONE;
        let slot = lowest.entry(key).or_insert(v);
        if guid(v as u32) < guid(*slot as u32) {
            *slot = v;
        }
    }
    lowest.values().map(|&m| i64::from(firsts[m][a] < firsts[m][b]) - i64::from(firsts[m][b] < firsts[m][a])).sum()
}

/// Routes a mesh, torus or hypercube in dimension order; see the module
/// documentation. Fills [`Routes::sl`] with the dateline bitmask of every
/// path (all zero on a mesh) and, on a torus with datelines, the per-hop
/// SL-to-VL tables ([`PathSl::hop_vls`]) that move a path to VL 1 at its
/// datelines.
///
/// Errors: [`RoutingError::NotApplicable`] when a part of the switch graph
/// is no mesh, torus or hypercube, or has more dateline dimensions than SL
/// bits; [`RoutingError::TooFewVls`] (needed 2) on a torus with datelines
/// when `options.max_vls` is 1; [`RoutingError::Disconnected`] with the
/// routes of every part when the fabric has more than one.
pub fn dor(fabric: &RoutingFabric, options: &EngineOptions) -> Result<Routes, RoutingError> {
    let shapes = shapes(fabric)?;
    if let Some(s) = shapes.iter().find(|s| s.datelines() > MAX_DATELINES) {
        return Err(not_applicable(format!(
            "the {} has {} ring dimensions of 5 or more switches; a path's SL holds one dateline bit per such \
             dimension and 16 SLs hold {MAX_DATELINES}",
            s.describe(),
            s.datelines()
        )));
    }
    let needed = shapes.iter().map(Shape::vls_needed).max().unwrap_or(1);
    if needed > u32::from(options.max_vls) {
        return Err(RoutingError::TooFewVls {
            engine: ENGINE,
            needed: needed.min(255) as u8,
            available: options.max_vls,
        });
    }
    let top = fabric.max_lid();
    let mut lfts: Vec<Lft> = (0..fabric.num_switches()).map(|_| Lft::unrouted(top)).collect();
    let mut sl = vec![vec![0u8; usize::from(top) + 1]; fabric.num_switches()];
    let mut load = vec![0u64; fabric.num_switch_port_slots()];
    let mut hop_vls = (needed > 1).then(|| HopVls::new(fabric));
    for shape in &shapes {
        route_part(fabric, shape, &mut lfts, &mut sl, &mut load, hop_vls.as_mut());
    }
    let mut path_sl = PathSl::per_switch(sl);
    path_sl.hop_vls = hop_vls;
    let routes = Routes { lfts, sl: Some(path_sl) };
    crate::error::disconnected_or_ok(fabric, routes)
}

/// Dateline dimensions whose bits fit an SL (16 SLs: 4 bits).
pub const MAX_DATELINES: usize = SL_COUNT.trailing_zeros() as usize;

/// Whether a hop leaving coordinate `x` of a ring of `k` switches in the
/// plus (`plus`) or minus direction, on a path that crosses the ring's
/// dateline, is the dateline hop or comes after it. See the module
/// documentation for why the coordinate alone decides.
pub fn past_dateline(x: u32, k: u32, plus: bool) -> bool {
    if plus {
        x == k - 1 || 2 * x < k
    } else {
        x == 0 || 2 * x >= k
    }
}

fn route_part(
    f: &RoutingFabric,
    shape: &Shape,
    lfts: &mut [Lft],
    sl: &mut [Vec<u8>],
    load: &mut [u64],
    mut hop_vls: Option<&mut HopVls>,
) {
    let n = shape.switches.len();
    let d = shape.dims.len();
    let mut local = vec![NONE; f.num_switches()];
    for (i, s) in shape.switches.iter().enumerate() {
        local[s.index()] = i as u32;
    }
    // Grid index (mixed radix, dimension 0 fastest) -> local switch.
    let cells: usize = shape.dims.iter().map(|dim| dim.size as usize).product();
    let mut at = vec![NONE; cells];
    let grid_index =
        |c: &[u32]| c.iter().zip(&shape.dims).rev().fold(0usize, |acc, (&x, dim)| acc * dim.size as usize + x as usize);
    for i in 0..n {
        at[grid_index(shape.coord(i))] = i as u32;
    }
    // Cables from each switch to each neighbour: ports[(i * d + k) * 2 + dir],
    // dir 0 = plus, 1 = minus.
    let mut ports: Vec<Vec<u8>> = vec![Vec::new(); n * d * 2];
    for i in 0..n {
        let c = shape.coord(i);
        for e in f.switch_neighbors(shape.switches[i]) {
            let j = local[e.neighbor.index()] as usize;
            let cj = shape.coord(j);
            let Some(k) = (0..d).find(|&k| c[k] != cj[k]) else { continue };
            let dim = shape.dims[k];
            let plus = if dim.ring { (c[k] + 1) % dim.size == cj[k] } else { c[k] + 1 == cj[k] };
            ports[(i * d + k) * 2 + usize::from(!plus)].push(e.port);
        }
    }
    let bit: Vec<u8> = {
        let mut next = 0u8;
        shape
            .dims
            .iter()
            .map(|dim| {
                if dim.has_dateline() {
                    next += 1;
                    1 << (next - 1)
                } else {
                    0
                }
            })
            .collect()
    };
    // Per-hop VLs: a ring-k cable carries a path on VL 1 once it is at or
    // past k's dateline; the table is the same whatever the input port.
    if let Some(h) = hop_vls.as_deref_mut() {
        for i in 0..n {
            let sw = shape.switches[i];
            let num_ports = f.switch(sw).num_ports;
            for k in 0..d {
                if bit[k] == 0 {
                    continue;
                }
                let x = shape.coord(i)[k];
                for (dir, plus) in [(0usize, true), (1, false)] {
                    let past = past_dateline(x, shape.dims[k].size, plus);
                    let mut table = [0u8; SL_COUNT];
                    for (v, t) in table.iter_mut().enumerate() {
                        *t = u8::from(past && v as u8 & bit[k] != 0);
                    }
                    for &out in &ports[(i * d + k) * 2 + dir] {
                        for in_port in 0..=num_ports {
                            h.set(sw, in_port, out, table);
                        }
                    }
                }
            }
        }
    }
    // The ring each missing cable opens, by the grid index of the ring's
    // coordinate-0 switch and the dimension: the coordinate the cable
    // leaves plus-wards.
    let mut gap = vec![NONE; n * d];
    for opened in shape.opened_rings() {
        let OpenedRing { dim, ring, from } = opened.expect("detection kept only cables that open a ring");
        gap[grid_index(&ring) * d + dim] = from;
    }
    let per_switch = f.end_ports_per_switch();
    let hosts: Vec<u64> = shape.switches.iter().map(|&s| per_switch[s.index()]).collect();

    let mut next = vec![NONE; n];
    let mut slot = vec![0u32; n];
    let mut mask = vec![0u8; n];
    let mut dist = vec![0u32; n];
    let mut flow = vec![0u64; n];
    let mut by_dist: Vec<u32> = (0..n as u32).collect();
    // Scratch: the coordinates of a next switch, and a destination's LIDs.
    let mut neighbour: Vec<u32> = Vec::with_capacity(d);
    // Where a path corrects dimension k: the coordinates it has by then
    // (the destination's below k, the source's from k), with k's zeroed.
    let mut ring0: Vec<u32> = Vec::with_capacity(d);
    let mut dests: Vec<(u32, u8, bool)> = Vec::new();
    // Every turn a detour round a switch gone takes against the order.
    let mut detours: std::collections::BTreeSet<Detour> = std::collections::BTreeSet::new();
    for t in 0..n {
        let ct = shape.coord(t);
        for s in 0..n {
            let cs = shape.coord(s);
            let mut m = 0u8;
            let mut hops = 0u32;
            let mut first = None;
            if let Some(h) = &shape.hole {
                let (m, step) = round_hole(shape, &bit, s, cs, ct, h);
                mask[s] = m;
                (next[s], slot[s]) = match step {
                    None => (NONE, 0),
                    Some(step) => {
                        if let Some(turn) = step.turn {
                            detours.insert(turn);
                        }
                        let (k, up) = step.taken();
                        neighbour.clear();
                        neighbour.extend_from_slice(cs);
                        neighbour[k] = step_along(neighbour[k], shape.dims[k].size, up);
                        (at[grid_index(&neighbour)], ((s * d + k) * 2 + usize::from(!up)) as u32)
                    }
                };
                continue;
            }
            for k in 0..d {
                if cs[k] == ct[k] {
                    continue;
                }
                let dim = shape.dims[k];
                let opened = if shape.missing.is_empty() {
                    NONE
                } else {
                    ring0.clear();
                    ring0.extend_from_slice(&ct[..k]);
                    ring0.extend_from_slice(&cs[k..]);
                    ring0[k] = 0;
                    gap[grid_index(&ring0) * d + k]
                };
                let (up, steps, wraps) = if dim.ring && opened != NONE {
                    // An opened ring is a line from the coordinate after
                    // the gap round to the one before it: the way that
                    // does not cross the gap, on VL 0 all along.
                    let fwd = (ct[k] + dim.size - cs[k]) % dim.size;
                    let crosses = (opened + dim.size - cs[k]) % dim.size < fwd;
                    if crosses {
                        (false, dim.size - fwd, false)
                    } else {
                        (true, fwd, false)
                    }
                } else if dim.ring {
                    let fwd = (ct[k] + dim.size - cs[k]) % dim.size;
                    let back = dim.size - fwd;
                    if fwd <= back {
                        (true, fwd, ct[k] < cs[k])
                    } else {
                        (false, back, ct[k] > cs[k])
                    }
                } else {
                    (ct[k] > cs[k], cs[k].abs_diff(ct[k]), false)
                };
                if wraps {
                    m |= bit[k];
                }
                hops += steps;
                first.get_or_insert((k, up));
            }
            mask[s] = m;
            dist[s] = hops;
            (next[s], slot[s]) = match first {
                None => (NONE, 0),
                Some((k, up)) => {
                    neighbour.clear();
                    neighbour.extend_from_slice(cs);
                    neighbour[k] = step_along(neighbour[k], shape.dims[k].size, up);
                    (at[grid_index(&neighbour)], ((s * d + k) * 2 + usize::from(!up)) as u32)
                }
            };
        }
        if shape.hole.is_some() {
            // Detours are longer than the coordinates say: count the hops.
            hops_along(&next, &mut dist);
        }
        // Traffic each switch forwards towards t (end ports only), farthest
        // first so upstream flows are complete before they are passed on.
        by_dist.sort_unstable_by_key(|&s| std::cmp::Reverse(dist[s as usize]));
        flow.iter_mut().zip(&hosts).for_each(|(fl, h)| *fl = *h);
        for &s in &by_dist {
            let s = s as usize;
            if next[s] != NONE {
                flow[next[s] as usize] += flow[s];
            }
        }

        let ts = shape.switches[t];
        dests.clear();
        for (port, peer) in f.switch_ports(ts).iter().enumerate() {
            if let Some(PortEnd::End(e)) = *peer {
                for lid in f.end_port(e).lids() {
                    dests.push((lid, port as u8, true));
                }
            }
        }
        dests.extend(f.switch(ts).lids().map(|lid| (lid, 0, false)));
        for &(lid, out, counted) in &dests {
            let li = lid as usize;
            lfts[ts.index()].ports[li] = out;
            for s in 0..n {
                let sw = shape.switches[s];
                sl[sw.index()][li] = mask[s];
                if next[s] == NONE {
                    continue;
                }
                let cands = &ports[slot[s] as usize];
                let base = f.switch_port_slot(sw, 0);
                let &p =
                    cands.iter().min_by_key(|&&p| (load[base + usize::from(p)], p)).expect("a neighbour has a cable");
                if counted {
                    load[base + usize::from(p)] += 1 + flow[s];
                }
                lfts[sw.index()].ports[li] = p;
            }
        }
    }
    // The hop after a turn against the order rides the detour VL: the
    // tables of the port pairs those turns take, whatever the SL.
    if let (Some(h), false) = (hop_vls, detours.is_empty()) {
        let vl = shape.detour_vl();
        for turn in &detours {
            let mut at_turn = shape.coord(turn.at as usize).to_vec();
            at_turn[turn.from_dim] = step_along(at_turn[turn.from_dim], shape.dims[turn.from_dim].size, turn.from_up);
            let i = at[grid_index(&at_turn)] as usize;
            let sw = shape.switches[i];
            for &in_port in &ports[(i * d + turn.from_dim) * 2 + usize::from(turn.from_up)] {
                for &out in &ports[(i * d + turn.to_dim) * 2 + usize::from(!turn.to_up)] {
                    let mut table = h.table(sw, in_port, out);
                    table.iter_mut().for_each(|v| *v |= vl);
                    h.set(sw, in_port, out, table);
                }
            }
        }
    }
}

/// The coordinate after `x` on a dimension of `size` switches, plus-wards
/// (`up`) or minus-wards.
fn step_along(x: u32, size: u32, up: bool) -> u32 {
    if up {
        (x + 1) % size
    } else {
        (x + size - 1) % size
    }
}

/// A detour round the switch gone: where a path's next hop would be the
/// hole, it leaves `at` (the hole's neighbour) along the next dimension it
/// corrects instead, and the switch it reaches turns back, against the
/// dimension order, into the dimension the path was on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Detour {
    /// Local index of the switch the early hop leaves.
    at: u32,
    /// The early hop's dimension and direction.
    from_dim: usize,
    from_up: bool,
    /// The dimension and direction the path then turns back into.
    to_dim: usize,
    to_up: bool,
}

/// The first hop of a path in dimension order round a switch gone.
struct HoleStep {
    /// The dimension and direction the order corrects first.
    first: (usize, bool),
    /// Where that hop would enter the hole: the turn taken instead.
    turn: Option<Detour>,
}

impl HoleStep {
    /// The dimension and direction of the hop actually taken.
    fn taken(&self) -> (usize, bool) {
        self.turn.map_or(self.first, |t| (t.from_dim, t.from_up))
    }
}

/// The SL bits of the path from `cs` to `ct` (local switch `s` at `cs`)
/// round the switch gone at `hole`, and its first hop: see "A switch
/// gone" in the module documentation.
fn round_hole(shape: &Shape, bit: &[u8], s: usize, cs: &[u32], ct: &[u32], hole: &[u32]) -> (u8, Option<HoleStep>) {
    let d = cs.len();
    let mut mask = 0u8;
    let mut step: Option<HoleStep> = None;
    let mut into_hole = false;
    for k in 0..d {
        if cs[k] == ct[k] {
            continue;
        }
        let dim = shape.dims[k];
        // The ring this segment runs on: the destination's coordinates
        // below k, the source's from k.
        let on_hole_ring = (0..d).all(|i| i == k || (if i < k { ct[i] } else { cs[i] }) == hole[i]);
        let (up, wraps) = if dim.ring {
            let fwd = (ct[k] + dim.size - cs[k]) % dim.size;
            let back = dim.size - fwd;
            if on_hole_ring && cs[k] != hole[k] && ct[k] != hole[k] {
                // An opened ring: the way that does not cross the hole.
                ((hole[k] + dim.size - cs[k]) % dim.size >= fwd, false)
            } else if fwd <= back {
                (true, ct[k] < cs[k])
            } else {
                (false, ct[k] > cs[k])
            }
        } else {
            (ct[k] > cs[k], false)
        };
        // Paths on the hole's rings stay on their VL 0 there: those rings
        // are lines now.
        if wraps && !on_hole_ring {
            mask |= bit[k];
        }
        match &mut step {
            None => {
                step = Some(HoleStep { first: (k, up), turn: None });
                into_hole = (0..d).all(|i| i == k || cs[i] == hole[i]) && step_along(cs[k], dim.size, up) == hole[k];
            }
            Some(first) if into_hole && first.turn.is_none() => {
                first.turn = Some(Detour {
                    at: s as u32,
                    from_dim: k,
                    from_up: up,
                    to_dim: first.first.0,
                    to_up: first.first.1,
                });
            }
            Some(_) => {}
        }
    }
    (mask, step)
}

/// `dist[s]`: hops from local switch `s` to the destination along `next`
/// (`NONE` at the destination). A loop, which the routing never makes,
/// would count as far as it went.
fn hops_along(next: &[u32], dist: &mut [u32]) {
    dist.fill(NONE);
    let mut chain: Vec<usize> = Vec::new();
    for s in 0..next.len() {
        chain.clear();
        let mut u = s;
        while dist[u] == NONE && chain.len() <= next.len() {
            if next[u] == NONE {
                dist[u] = 0;
                break;
            }
            chain.push(u);
            u = next[u] as usize;
        }
        let mut hops = if dist[u] == NONE { 0 } else { dist[u] };
        for &c in chain.iter().rev() {
            hops += 1;
            if dist[c] == NONE {
                dist[c] = hops;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::validate;
    use crate::testfab;

    fn shape_of(f: &RoutingFabric) -> Shape {
        let mut v = shapes(f).unwrap();
        assert_eq!(v.len(), 1);
        v.pop().unwrap()
    }

    #[test]
    fn detects_meshes_tori_and_hypercubes() {
        let s = shape_of(&testfab::grid(&[4, 3], &[false, false], 1, 1));
        assert_eq!(s.dims, vec![Dim { size: 4, ring: false }, Dim { size: 3, ring: false }]);
        assert_eq!(s.describe(), "4x3 mesh");
        let s = shape_of(&testfab::grid(&[5, 6, 3], &[true, true, true], 1, 0));
        assert_eq!(s.describe(), "5x6x3 torus");
        assert_eq!(s.datelines(), 2, "the 3-ring needs no dateline");
        // A 4x4 torus is the 4-cube.
        let s = shape_of(&testfab::grid(&[4, 4], &[true, true], 1, 0));
        assert_eq!(s.describe(), "2x2x2x2 hypercube");
        assert_eq!(s.vls_needed(), 1);
        let s = shape_of(&testfab::grid(&[2, 2, 2], &[false; 3], 2, 1));
        assert_eq!(s.describe(), "2x2x2 hypercube");
        let s = shape_of(&testfab::grid(&[7, 2], &[true, false], 1, 1));
        assert_eq!(s.describe(), "7rx2 mesh/torus");
        assert_eq!(s.vls_needed(), 2);
    }

    #[test]
    fn origin_is_a_corner_and_coordinates_follow_the_cabling() {
        let f = testfab::grid(&[4, 3], &[false, false], 1, 0);
        let s = shape_of(&f);
        // Distinct coordinates, neighbours differ by one step in one place.
        for (i, &a) in s.switches.iter().enumerate() {
            for e in f.switch_neighbors(a) {
                let j = s.switches.iter().position(|&x| x == e.neighbor).unwrap();
                let diff: u32 = s.coord(i).iter().zip(s.coord(j)).map(|(x, y)| x.abs_diff(*y)).sum();
                assert_eq!(diff, 1);
            }
        }
        let corner = s.switches[(0..s.switches.len()).find(|&i| s.coord(i) == [0, 0]).unwrap()];
        assert_eq!(f.switch_neighbors(corner).len(), 2);
    }

    #[test]
    fn refuses_what_is_no_grid() {
        let e = shapes(&testfab::FatTree::full(8, 2).build()).unwrap_err();
        assert!(matches!(e, RoutingError::NotApplicable { engine: "dor", .. }), "{e}");
        // A grid with one cable missing.
        let mut b = RoutingFabric::builder();
        let g = testfab::grid(&[3, 3], &[false, false], 1, 0);
        for s in g.switches() {
            b.add_switch(s.clone()).unwrap();
        }
        for l in g.links().iter().skip(1) {
            b.connect(l.a, l.b).unwrap();
        }
        let e = shapes(&b.build().unwrap()).unwrap_err();
        assert!(e.to_string().contains("dor does not apply"), "{e}");
    }

    #[test]
    fn mesh_routes_validate_minimal_with_sl_zero() {
        let f = testfab::grid(&[3, 4], &[false, false], 1, 2);
        let r = dor(&f, &EngineOptions { max_vls: 1, ..Default::default() }).unwrap();
        let rep = validate(&f, &r);
        assert!(rep.is_clean() && rep.all_minimal() && rep.fully_connected(), "{rep}");
        assert!(r.sl.unwrap().by_source_switch.iter().all(|row| row.iter().all(|&x| x == 0)));
    }

    /// The coordinate rule against every path of rings of 5 to 40: a hop of
    /// a crossing path is "past" exactly from its dateline hop on, and VL 1
    /// never holds the cable leaving k-2 plus-wards (1 minus-wards), so it
    /// cannot close the ring; VL 0 never holds the dateline cable.
    #[test]
    fn past_dateline_matches_every_shortest_ring_path() {
        for k in 5u32..=40 {
            let mut vl1 = [vec![false; k as usize], vec![false; k as usize]];
            let mut vl0_dateline = false;
            for s in 0..k {
                for t in 0..k {
                    let fwd = (t + k - s) % k;
                    let plus = fwd <= k - fwd;
                    let crosses = if plus { t < s } else { t > s };
                    let (mut x, mut past) = (s, false);
                    while x != t {
                        let dateline = if plus { x == k - 1 } else { x == 0 };
                        past |= dateline;
                        let vl = crosses && past_dateline(x, k, plus);
                        assert_eq!(crosses && past, vl, "k {k}: {s} -> {t} leaving {x}");
                        if vl {
                            vl1[usize::from(!plus)][x as usize] = true;
                        } else {
                            vl0_dateline |= dateline;
                        }
                        x = if plus { (x + 1) % k } else { (x + k - 1) % k };
                    }
                }
            }
            assert!(!vl0_dateline, "k {k}");
            assert!(!vl1[0][(k - 2) as usize] && !vl1[1][1], "k {k}");
            assert!(vl1[0][(k - 1) as usize] && vl1[1][0], "k {k}: the dateline hops ride VL 1");
        }
    }

    /// The switches whose path to `lid` crosses cable `link` (either way).
    fn crossing(f: &RoutingFabric, r: &Routes, link: &crate::fabric::Link, lid: u16) -> Vec<bool> {
        let ends = |e: PortEnd| match e {
            PortEnd::Switch(s, p) => Some((s, p)),
            PortEnd::End(_) => None,
        };
        let (a, b) = (ends(link.a).unwrap(), ends(link.b).unwrap());
        f.switch_ids()
            .map(|mut s| {
                for _ in 0..f.num_switches() {
                    let p = r.port(s, lid);
                    if (s, p) == a || (s, p) == b {
                        return true;
                    }
                    match f.switch_ports(s).get(usize::from(p)).copied().flatten() {
                        Some(PortEnd::Switch(n, _)) => s = n,
                        _ => return false,
                    }
                }
                false
            })
            .collect()
    }

    /// Per switch: whether its path to `lid` goes through switch `gone`.
    fn through(f: &RoutingFabric, r: &Routes, gone: SwitchId, lid: u16) -> Vec<bool> {
        f.switch_ids()
            .map(|mut s| {
                for _ in 0..f.num_switches() {
                    if s == gone {
                        return true;
                    }
                    match f.switch_ports(s).get(usize::from(r.port(s, lid))).copied().flatten() {
                        Some(PortEnd::Switch(n, _)) => s = n,
                        _ => return false,
                    }
                }
                false
            })
            .collect()
    }

    fn switch_cables(f: &RoutingFabric) -> Vec<usize> {
        let both = |l: &crate::fabric::Link| matches!((l.a, l.b), (PortEnd::Switch(..), PortEnd::Switch(..)));
        f.links().iter().enumerate().filter(|(_, l)| both(l)).map(|(i, _)| i).collect()
    }

    fn assert_deadlock_free_and_whole(f: &RoutingFabric, r: &Routes) {
        let rep = validate(f, r);
        assert!(rep.is_clean() && rep.fully_connected(), "{rep}");
        let cdg = crate::cdg::analyze_cdg(f, r, crate::cdg::CdgScope { include_switches: true });
        assert!(cdg.deadlock_free(), "{cdg}");
    }

    /// Every single cable of a 6x6 and a 5x3x7 torus unplugged in turn:
    /// dor still applies, its routes are whole and deadlock free on its two
    /// VLs, and the only entries that change are those whose old path
    /// crossed the cable.
    #[test]
    fn a_torus_missing_a_cable_routes_round_it_and_moves_only_what_crossed_it() {
        for (sizes, wrap) in [(&[6u8, 6][..], &[true, true][..]), (&[5, 3, 7], &[true, true, true])] {
            let whole = testfab::grid(sizes, wrap, 1, 1);
            let options = EngineOptions { max_vls: 2, ..Default::default() };
            let before = dor(&whole, &options).unwrap();
            for cut in switch_cables(&whole) {
                let f = testfab::without_links(&whole, &[cut]);
                let shape = shape_of(&f);
                assert_eq!(shape.missing.len(), 1, "{sizes:?} without cable {cut}");
                assert!(shape.describe().ends_with("torus with 1 cable missing"), "{}", shape.describe());
                let after = dor(&f, &options).unwrap();
                assert_deadlock_free_and_whole(&f, &after);
                let link = &whole.links()[cut];
                for lid in 1..=f.max_lid() {
                    let crossed = crossing(&whole, &before, link, lid);
                    for s in f.switch_ids() {
                        if before.port(s, lid) != after.port(s, lid) {
                            assert!(crossed[s.index()], "{sizes:?} without cable {cut}: {s:?} moved LID {lid}");
                        }
                    }
                }
            }
        }
    }

    /// Every switch of several tori and a hypercube powered off in turn:
    /// dor still applies round the hole, its routes are whole and deadlock
    /// free on twice the plain VLs (checked per hop), and the only LFT
    /// entries that change are those whose old path went through the
    /// switch gone, the origin the coordinates start from and its
    /// neighbours included.
    #[test]
    fn a_torus_missing_a_switch_routes_round_it_and_moves_only_what_went_through_it() {
        let cases: [(&[u8], &[bool], u8); 5] = [
            (&[6, 6], &[true, true], 4),
            (&[5, 5], &[true, true], 4),
            (&[4, 4], &[true, true], 2),
            (&[3, 3, 3], &[true, true, true], 2),
            (&[5, 3, 6], &[true, true, true], 4),
        ];
        for (sizes, wrap, vls) in cases {
            let whole = testfab::grid(sizes, wrap, 1, 1);
            let options = EngineOptions { max_vls: vls, ..Default::default() };
            let before = dor(&whole, &options).unwrap();
            let mut detoured = 0;
            for gone in whole.switch_ids() {
                let f = testfab::without_switch(&whole, gone);
                let shape = shape_of(&f);
                let what = format!("{sizes:?} without switch {}", gone.index());
                assert!(shape.hole.is_some(), "{what}: {}", shape.describe());
                assert!(shape.describe().ends_with("with 1 switch missing"), "{}", shape.describe());
                assert_eq!(shape.vls_needed(), u32::from(vls), "{what}");
                let after = dor(&f, &options).unwrap();
                assert_deadlock_free_and_whole(&f, &after);
                let hop_vls = after.sl.as_ref().and_then(|sl| sl.hop_vls.as_ref()).expect("per-hop VLs");
                let top = f.switch_ids().flat_map(|s| {
                    let ports = f.switch(s).num_ports;
                    (1..=ports).flat_map(move |i| (1..=ports).map(move |o| (s, i, o)))
                });
                let highest = top.map(|(s, i, o)| *hop_vls.table(s, i, o).iter().max().unwrap()).max().unwrap();
                if highest >= shape.detour_vl() {
                    detoured += 1;
                }
                // Switch indices after `gone` moved down one.
                let old = |s: SwitchId| SwitchId(s.0 + u32::from(s.0 >= gone.0));
                let lids =
                    f.switches().iter().flat_map(|s| s.lids()).chain(f.end_ports().iter().flat_map(|e| e.lids()));
                for lid in lids.map(|l| l as u16) {
                    let through = through(&whole, &before, gone, lid);
                    for s in f.switch_ids() {
                        if before.port(old(s), lid) != after.port(s, lid) {
                            assert!(through[old(s).index()], "{what}: switch {} moved LID {lid}", s.index());
                        }
                    }
                }
            }
            assert!(detoured > 0, "{sizes:?}: no hole made a detour turn");
        }
    }

    /// Coordinates start where most rings agree, whichever switch is
    /// gone: a 6x5 torus whose GUIDs run along its rings but for one ring
    /// per dimension has the coordinates its switches are named by, whole
    /// and with each switch gone in turn (the hole where the switch was),
    /// though the origin's loss moves the lowest GUID.
    #[test]
    fn coordinates_start_where_most_rings_agree_whichever_switch_is_gone() {
        let grid = testfab::grid(&[6, 5], &[true, true], 1, 1);
        let named = |f: &RoutingFabric, s: SwitchId| -> Vec<u32> {
            f.switch(s).name.trim_start_matches("sw-").split('-').map(|x| x.parse().unwrap()).collect()
        };
        // GUIDs run along x, then y. Swapping those of (0,1) and (0,4)
        // makes the ring along y at x=0 run the other way from its lowest
        // switch, and the ring along x at y=1 start at (1,1).
        let at = |c: [u32; 2]| grid.switch_ids().find(|&t| named(&grid, t) == c).unwrap().index();
        let mut guids: Vec<u64> = grid.switches().iter().map(|s| s.guid).collect();
        guids.swap(at([0, 1]), at([0, 4]));
        let whole = testfab::with_switch_guids(&grid, &guids);
        let check = |f: &RoutingFabric, gone: Option<Vec<u32>>| {
            let shape = shape_of(f);
            assert_eq!(shape.hole, gone, "{}", shape.describe());
            for (i, &s) in shape.switches.iter().enumerate() {
                assert_eq!(shape.coord(i), named(f, s), "{} with {gone:?} gone", f.switch(s).name);
            }
        };
        check(&whole, None);
        for gone in whole.switch_ids() {
            check(&testfab::without_switch(&whole, gone), Some(named(&whole, gone)));
        }
    }

    #[test]
    fn a_torus_missing_one_cable_on_each_of_four_rings_still_routes() {
        let whole = testfab::grid(&[5, 6, 5], &[true; 3], 1, 1);
        let cables = switch_cables(&whole);
        let options = EngineOptions { max_vls: 2, ..Default::default() };
        // Cables of four different rings: the generator cables each
        // switch's plus neighbours in turn, dimension by dimension.
        let name = |e: PortEnd| match e {
            PortEnd::Switch(s, _) => whole.switch(s).name.clone(),
            PortEnd::End(_) => unreachable!(),
        };
        let mut rings: Vec<(String, u8)> = Vec::new();
        let mut cut = Vec::new();
        for &i in &cables {
            let l = &whole.links()[i];
            let (a, b) = (name(l.a), name(l.b));
            let (ca, cb): (Vec<&str>, Vec<&str>) = (a.split('-').collect(), b.split('-').collect());
            let k = (0..3).find(|&k| ca[k + 1] != cb[k + 1]).unwrap() as u8;
            let mut ring = ca.clone();
            ring[k as usize + 1] = "*";
            let ring = (ring.join("-"), k);
            if cut.len() < 4 && !rings.contains(&ring) && i % 7 == 0 {
                rings.push(ring);
                cut.push(i);
            }
        }
        assert_eq!(cut.len(), 4);
        let f = testfab::without_links(&whole, &cut);
        assert_eq!(shape_of(&f).missing.len(), 4);
        assert_deadlock_free_and_whole(&f, &dor(&f, &options).unwrap());
    }

    #[test]
    fn a_ring_cut_twice_or_a_line_cut_is_no_grid() {
        let options = EngineOptions { max_vls: 2, ..Default::default() };
        // Both cables of a 6-ring's first switch along dimension 0: the
        // ring falls in two.
        let whole = testfab::grid(&[6, 6], &[true, true], 1, 1);
        let first = whole.switch_ids().next().unwrap();
        let mut cut = Vec::new();
        for (i, l) in whole.links().iter().enumerate() {
            let touches = [l.a, l.b].iter().any(|e| matches!(e, PortEnd::Switch(s, p) if *s == first && *p <= 2));
            if touches {
                cut.push(i);
            }
        }
        assert_eq!(cut.len(), 2);
        let e = dor(&testfab::without_links(&whole, &cut), &options).unwrap_err();
        assert!(matches!(e, RoutingError::NotApplicable { engine: "dor", .. }), "{e}");
        // A 4x4 torus is a hypercube of 2-switch lines: a cable gone cuts one.
        let cube = testfab::grid(&[4, 4], &[true, true], 1, 1);
        let e = dor(&testfab::without_links(&cube, &switch_cables(&cube)[..1]), &options).unwrap_err();
        assert!(matches!(e, RoutingError::NotApplicable { engine: "dor", .. }), "{e}");
        // A switch gone from a torus.
        let mut b = RoutingFabric::builder();
        for s in whole.switches().iter().skip(1) {
            b.add_switch(s.clone()).unwrap();
        }
        let id = |e: PortEnd| match e {
            PortEnd::Switch(s, p) if s != first => Some(PortEnd::Switch(SwitchId(s.0 - 1), p)),
            _ => None,
        };
        for l in whole.links() {
            if let (Some(a), Some(z)) = (id(l.a), id(l.b)) {
                b.connect(a, z).unwrap();
            }
        }
        // Routed round, but on 4 VLs (see "A switch gone").
        let e = dor(&b.build().unwrap(), &options).unwrap_err();
        assert!(matches!(e, RoutingError::TooFewVls { engine: "dor", needed: 4, .. }), "{e}");
    }

    #[test]
    fn too_many_datelines_for_16_sls_are_refused() {
        let f = testfab::grid(&[5, 5, 5, 5, 5], &[true; 5], 1, 0);
        let e = dor(&f, &EngineOptions { max_vls: 8, ..Default::default() }).unwrap_err();
        assert!(
            matches!(&e, RoutingError::NotApplicable { reason, .. } if reason.contains("5 ring dimensions")),
            "{e}"
        );
    }
}
