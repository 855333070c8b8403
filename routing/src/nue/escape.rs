//! Escape paths: a layer's spanning tree and the dependencies reserved
//! for routing along it.

use super::cdg::{Cdg, BLOCKED, USED};
use super::net::Net;
use super::NONE;

/// A layer's escape tree (a spanning forest: one tree per connected part).
pub(super) struct Escape {
    parent: Vec<u32>,
    /// Channel to the parent (NONE at roots).
    up: Vec<u32>,
    depth: Vec<u32>,
    /// The switches on the current destination's tree path to its root:
    /// `path_stamp[v] == stamp` and `path_down[v]` is the channel down
    /// towards the destination.
    path_stamp: Vec<u32>,
    path_down: Vec<u32>,
    stamp: u32,
    /// Switches whose escape paths are reserved (end ports hang off them).
    pub(super) reserved: Vec<bool>,
}

impl Escape {
    /// Roots every part at the switch with the least total hop distance to
    /// (a sample of) the layer's destination switches; parents among the
    /// switches one hop nearer the root over the least loaded cable.
    pub(super) fn build(net: &Net, dest_switches: &[u32], load: &[u64]) -> Escape {
        let n = net.n();
        let mut sum = vec![0u64; n];
        let mut dist = vec![NONE; n];
        let mut queue = Vec::with_capacity(n);
        let mut per_part: Vec<Vec<u32>> = vec![Vec::new(); net.parts.len()];
        for &d in dest_switches {
            per_part[net.part[d as usize] as usize].push(d);
        }
        const SAMPLES: usize = 32;
        let bfs = |src: u32, dist: &mut Vec<u32>, queue: &mut Vec<u32>| {
            dist.fill(NONE);
            queue.clear();
            dist[src as usize] = 0;
            queue.push(src);
            let mut head = 0;
            while head < queue.len() {
                let u = queue[head] as usize;
                head += 1;
                for c in net.ch.out(u) {
                    let w = net.ch.head[c as usize] as usize;
                    if dist[w] == NONE {
                        dist[w] = dist[u] + 1;
                        queue.push(w as u32);
                    }
                }
            }
        };
        let mut parent = vec![NONE; n];
        let mut up = vec![NONE; n];
        let mut depth = vec![NONE; n];
        for (p, nodes) in net.parts.iter().enumerate() {
            let ds = &per_part[p];
            let root = if ds.is_empty() {
                nodes[0]
            } else {
                let step = ds.len().div_ceil(SAMPLES);
                for &d in ds.iter().step_by(step) {
                    bfs(d, &mut dist, &mut queue);
                    for &v in nodes {
                        sum[v as usize] += u64::from(dist[v as usize]);
                    }
                }
                *nodes.iter().min_by_key(|&&v| (sum[v as usize], v)).expect("a part has a switch")
            };
            bfs(root, &mut dist, &mut queue);
            for &v in &queue {
                let v = v as usize;
                depth[v] = dist[v];
                if v as u32 == root {
                    continue;
                }
                let best = net
                    .ch
                    .out(v)
                    .filter(|&c| dist[net.ch.head[c as usize] as usize] + 1 == dist[v])
                    .min_by_key(|&c| (load[c as usize] + load[net.ch.rev[c as usize] as usize], c))
                    .expect("a breadth-first tree has parents");
                up[v] = best;
                parent[v] = net.ch.head[best as usize];
            }
        }
        let mut reserved = vec![false; n];
        for &d in dest_switches {
            reserved[d as usize] = true;
        }
        Escape { parent, up, depth, path_stamp: vec![0; n], path_down: vec![NONE; n], stamp: 0, reserved }
    }

    /// Marks the tree path of destination switch `d` for [`Escape::chan`].
    pub(super) fn mark_path(&mut self, net: &Net, d: u32) {
        self.stamp += 1;
        let mut z = d;
        while self.parent[z as usize] != NONE {
            let y = self.parent[z as usize];
            self.path_stamp[y as usize] = self.stamp;
            self.path_down[y as usize] = net.ch.rev[self.up[z as usize] as usize];
            z = y;
        }
    }

    /// The escape channel of switch `x` towards the marked destination.
    pub(super) fn chan(&self, x: u32) -> u32 {
        if self.path_stamp[x as usize] == self.stamp {
            self.path_down[x as usize]
        } else {
            self.up[x as usize]
        }
    }
}

/// Resets `cdg` for a layer: template states, the escape dependencies of
/// the layer's destinations marked used, and an up*/down* order of the
/// escape tree that agrees with them.
pub(super) fn init_layer(net: &Net, cdg: &mut Cdg, esc: &Escape, dest_switches: &[u32]) {
    cdg.state.copy_from_slice(&net.template);
    let n = net.n();
    // Up channels (towards a switch nearer the root, ties by index) first,
    // deepest tail first; then down channels, shallowest head first.
    let key = |c: usize| {
        let (a, b) = (net.ch.tail[c] as usize, net.ch.head[c] as usize);
        if (esc.depth[b], b) < (esc.depth[a], a) {
            (0u8, u32::MAX - esc.depth[a], a as u32, c as u32)
        } else {
            (1u8, esc.depth[b], b as u32, c as u32)
        }
    };
    let mut chans: Vec<u32> = (0..net.ch.num_channels() as u32).collect();
    chans.sort_unstable_by_key(|&c| key(c as usize));
    for (i, &c) in chans.iter().enumerate() {
        cdg.ord[c as usize] = i as u32;
    }
    let mark = |cdg: &mut Cdg, a: u32, b: u32| {
        let e = net.dep(a, b);
        debug_assert!(cdg.ord[a as usize] < cdg.ord[b as usize], "escape edges agree with the initial order");
        debug_assert_ne!(cdg.state[e], BLOCKED);
        cdg.state[e] = USED;
    };
    // Up, then up again.
    for x in 0..n {
        let p = esc.parent[x];
        if p != NONE && esc.parent[p as usize] != NONE {
            mark(cdg, esc.up[x], esc.up[p as usize]);
        }
    }
    // Down paths to every destination switch, and the turns into them.
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); n];
    for x in 0..n {
        if esc.parent[x] != NONE {
            children[esc.parent[x] as usize].push(x as u32);
        }
    }
    let mut done = vec![false; n];
    for &d in dest_switches {
        let mut z = d;
        while esc.parent[z as usize] != NONE && !done[z as usize] {
            done[z as usize] = true;
            let y = esc.parent[z as usize];
            let down_z = net.ch.rev[esc.up[z as usize] as usize];
            for &c in &children[y as usize] {
                if c != z {
                    mark(cdg, esc.up[c as usize], down_z);
                }
            }
            if esc.parent[y as usize] != NONE {
                mark(cdg, net.ch.rev[esc.up[y as usize] as usize], down_z);
            }
            z = y;
        }
    }
}
