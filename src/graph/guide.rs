//! Guides: how the compile lane and the schedules fit together.

pub mod algorithm_and_schedule {
    //! # Algorithm and schedule
    //!
    //! (written below)
}

pub mod getting_started {
    //! # Getting started
    //!
    //! (written below)
}
