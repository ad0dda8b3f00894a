extension Array where Element: Comparable {
    /// Whether this array, ascending, holds `value` (binary search).
    @inlinable
    public func sortedContains(_ value: Element) -> Bool {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) >> 1
            if self[middle] < value { low = middle + 1 } else { high = middle }
        }
        return low < count && self[low] == value
    }
}
