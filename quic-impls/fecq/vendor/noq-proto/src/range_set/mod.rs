mod array_range_set;
#[cfg(test)]
mod tests;

pub(crate) use array_range_set::ArrayRangeSet;
