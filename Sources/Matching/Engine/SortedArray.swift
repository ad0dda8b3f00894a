extension RandomAccessCollection where Element: Comparable {
    /// Whether this collection, ascending, holds `value` (binary search).
    @inlinable
    public func sortedContains(_ value: Element) -> Bool {
        var low = startIndex
        var remaining = count
        while remaining > 0 {
            let half = remaining >> 1
            let middle = index(low, offsetBy: half)
            if self[middle] < value {
                low = index(after: middle)
                remaining -= half + 1
            } else {
                remaining = half
            }
        }
        return low != endIndex && self[low] == value
    }
}
