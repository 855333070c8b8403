//! Fault rules: what happens to a MAD when it reaches where it is going.
//!
//! Rules are kept in order and evaluated for every MAD at its destination
//! (a request at the node whose SMA or SM it addresses, a response before it
//! is handed to the device that waits for it). Each rule has a [`Match`] and
//! an [`Action`]:
//!
//! | action | effect | evaluation |
//! |---|---|---|
//! | `Pass` | deliver now | stops |
//! | `Drop { probability }` | dropped with that probability | stops if dropped, else goes on |
//! | `Delay(d)` | adds `d` of virtual time | goes on (delays add up) |
//! | `Hold` | parked until the rule's handle is released | stops |
//!
//! Random draws come from the fabric's seeded generator and happen only when
//! a `Drop` rule with 0 < p < 1 matches, so the same seed and the same
//! sequence of sends give the same outcome.

use std::time::Duration;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::mad::{AttributeId, Method, MgmtClass};
use crate::topology::NodeIdx;

/// Identifies an installed rule (and the MADs a `Hold` rule parked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleHandle(pub(crate) u64);

/// Whether a MAD asks or answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Get, Set, Trap, Send, Report, ... (no response bit).
    Request,
    /// GetResp and every method with the response bit (IBA 13.4.5).
    Response,
}

/// Which MADs a rule applies to; `None` fields match anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Match {
    /// For a request: the node it is addressed to. For a response: the node
    /// that answered.
    pub node: Option<NodeIdx>,
    pub class: Option<MgmtClass>,
    pub method: Option<Method>,
    pub attribute: Option<AttributeId>,
    pub direction: Option<Direction>,
}

impl Match {
    /// Matches every MAD.
    pub fn any() -> Self {
        Match::default()
    }
    pub fn node(mut self, node: NodeIdx) -> Self {
        self.node = Some(node);
        self
    }
    pub fn class(mut self, class: MgmtClass) -> Self {
        self.class = Some(class);
        self
    }
    pub fn method(mut self, method: Method) -> Self {
        self.method = Some(method);
        self
    }
    pub fn attribute(mut self, attribute: AttributeId) -> Self {
        self.attribute = Some(attribute);
        self
    }
    pub fn direction(mut self, direction: Direction) -> Self {
        self.direction = Some(direction);
        self
    }

    pub(crate) fn matches(&self, m: &MadContext) -> bool {
        self.node.is_none_or(|n| n == m.node)
            && self.class.is_none_or(|c| c == m.class)
            && self.method.is_none_or(|x| x == m.method)
            && self.attribute.is_none_or(|a| a == m.attribute)
            && self.direction.is_none_or(|d| d == m.direction)
    }
}

/// What a matching rule does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    Pass,
    /// Drop with probability `probability` (clamped to 0..=1).
    Drop {
        probability: f64,
    },
    Delay(Duration),
    Hold,
}

/// One fault rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rule {
    pub when: Match,
    pub action: Action,
}

impl Rule {
    pub fn pass(when: Match) -> Self {
        Rule { when, action: Action::Pass }
    }
    /// Drops every matching MAD.
    pub fn drop_all(when: Match) -> Self {
        Rule { when, action: Action::Drop { probability: 1.0 } }
    }
    pub fn drop_with(when: Match, probability: f64) -> Self {
        Rule { when, action: Action::Drop { probability } }
    }
    pub fn delay(when: Match, by: Duration) -> Self {
        Rule { when, action: Action::Delay(by) }
    }
    pub fn hold(when: Match) -> Self {
        Rule { when, action: Action::Hold }
    }
}

/// The facts about a MAD that rules look at.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MadContext {
    pub node: NodeIdx,
    pub class: MgmtClass,
    pub method: Method,
    pub attribute: AttributeId,
    pub direction: Direction,
}

/// What the rules decided for one MAD.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Verdict {
    Deliver { delay: Duration },
    Drop,
    Hold(RuleHandle),
}

/// The ordered rule list.
#[derive(Debug, Default)]
pub(crate) struct Rules {
    rules: Vec<(RuleHandle, Rule)>,
    next: u64,
}

impl Rules {
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Appends `rule` (evaluated after the ones already installed).
    pub fn push(&mut self, rule: Rule) -> RuleHandle {
        let h = self.fresh();
        self.rules.push((h, rule));
        h
    }

    /// Inserts `rule` ahead of every installed rule.
    pub fn push_front(&mut self, rule: Rule) -> RuleHandle {
        let h = self.fresh();
        self.rules.insert(0, (h, rule));
        h
    }

    fn fresh(&mut self) -> RuleHandle {
        self.next += 1;
        RuleHandle(self.next)
    }

    /// Removes a rule; false if it was not installed.
    pub fn remove(&mut self, h: RuleHandle) -> bool {
        let before = self.rules.len();
        self.rules.retain(|(x, _)| *x != h);
        self.rules.len() != before
    }

    pub fn evaluate(&self, m: &MadContext, rng: &mut ChaCha8Rng) -> Verdict {
        let mut delay = Duration::ZERO;
        for (h, r) in &self.rules {
            if !r.when.matches(m) {
                continue;
            }
            match r.action {
                Action::Pass => break,
                Action::Drop { probability } => {
                    let p = probability.clamp(0.0, 1.0);
                    let dropped = if p >= 1.0 {
                        true
                    } else if p <= 0.0 {
                        false
                    } else {
                        rng.gen::<f64>() < p
                    };
                    if dropped {
                        return Verdict::Drop;
                    }
                }
                Action::Delay(d) => delay += d,
                Action::Hold => return Verdict::Hold(*h),
            }
        }
        Verdict::Deliver { delay }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn ctx(node: usize, attr: AttributeId) -> MadContext {
        MadContext {
            node: NodeIdx(node),
            class: MgmtClass::SubnMgmtDirected,
            method: Method::Get,
            attribute: attr,
            direction: Direction::Request,
        }
    }

    #[test]
    fn first_stopping_rule_wins_and_delays_add_up() {
        let mut rules = Rules::default();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        rules.push(Rule::delay(Match::any(), Duration::from_micros(5)));
        rules.push(Rule::delay(Match::any().node(NodeIdx(2)), Duration::from_micros(7)));
        let pass = rules.push(Rule::pass(Match::any().attribute(AttributeId::NodeInfo)));
        rules.push(Rule::drop_all(Match::any()));
        assert_eq!(
            rules.evaluate(&ctx(2, AttributeId::NodeInfo), &mut rng),
            Verdict::Deliver { delay: Duration::from_micros(12) }
        );
        assert_eq!(rules.evaluate(&ctx(1, AttributeId::PortInfo), &mut rng), Verdict::Drop);
        assert!(rules.remove(pass));
        assert!(!rules.remove(pass));
        assert_eq!(rules.evaluate(&ctx(2, AttributeId::NodeInfo), &mut rng), Verdict::Drop);
        let h = rules.push_front(Rule::hold(Match::any().node(NodeIdx(1))));
        assert_eq!(rules.evaluate(&ctx(1, AttributeId::NodeInfo), &mut rng), Verdict::Hold(h));
    }

    #[test]
    fn probabilistic_drop_follows_the_seed() {
        let mut rules = Rules::default();
        rules.push(Rule::drop_with(Match::any(), 0.5));
        let run = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..64)
                .map(|_| rules.evaluate(&ctx(0, AttributeId::NodeInfo), &mut rng) == Verdict::Drop)
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        let dropped = run(7).iter().filter(|d| **d).count();
        assert!((16..=48).contains(&dropped), "{dropped} of 64 dropped at p=0.5");
    }
}
