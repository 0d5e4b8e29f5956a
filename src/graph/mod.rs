//! The compile lane: a graph builder with schedule hints, the annotation pass, the StableHLO
//! export and the graph executor.
