/// Where members live: the prefectures (JIS X 0401 codes 1...47, 48 abroad), their populations and
/// their neighbours, for residence and hometown distributions and for filters "my prefecture and the
/// next ones".
public enum JapanGeography {
    /// Population in units of 10,000 (2020 census, rounded), indexed by code - 1.
    static let population: [Double] = [
        522, 124, 121, 230, 96, 107, 183, 287, 193, 194,  // 1 北海道 … 10 群馬
        734, 628, 1405, 924, 220, 103, 113, 77, 81, 205,  // 11 埼玉 … 20 長野
        198, 363, 754, 177, 141, 258, 884, 547, 132, 92,  // 21 岐阜 … 30 和歌山
        55, 67, 189, 280, 134, 72, 95, 133, 69, 513,  // 31 鳥取 … 40 福岡
        81, 131, 174, 112, 107, 159, 147,  // 41 佐賀 … 47 沖縄
    ]

    static let tokyo: Int16 = 13
    static let abroad: Int16 = 48

    /// How much more a dating service's members concentrate in a prefecture than its population:
    /// Tokyo most, then the large metropolitan prefectures, the regional hubs, and the rest.
    static func urbanFactor(_ code: Int16) -> Double {
        switch code {
        case 13: 2.2
        case 14, 27, 11, 23, 12, 40: 1.2
        case 1, 28, 26, 4, 34, 22: 0.95
        default: 0.7
        }
    }

    /// Residence: population × urban factor, abroad 0.3 % of members.
    public static let residence: WeightedTable<Int16> = {
        var pairs = population.enumerated().map {
            (Int16($0.offset + 1), $0.element * urbanFactor(Int16($0.offset + 1)))
        }
        let total = pairs.reduce(0) { $0 + $1.1 }
        pairs.append((abroad, total * 0.003))
        return WeightedTable(pairs)
    }()

    /// Hometown of those not living where they grew up: population alone (people move to the cities),
    /// abroad 0.5 %.
    public static let hometown: WeightedTable<Int16> = {
        var pairs = population.enumerated().map { (Int16($0.offset + 1), $0.element) }
        let total = pairs.reduce(0) { $0 + $1.1 }
        pairs.append((abroad, total * 0.005))
        return WeightedTable(pairs)
    }()

    /// Land (and bridge or tunnel) neighbours of each prefecture, by code; symmetric. Okinawa and
    /// abroad have none.
    public static let neighbours: [Int16: [Int16]] = [
        1: [2], 2: [1, 3, 5], 3: [2, 4, 5], 4: [3, 5, 6, 7], 5: [2, 3, 4, 6], 6: [4, 5, 7, 15],
        7: [4, 6, 8, 9, 10, 15], 8: [7, 9, 11, 12], 9: [7, 8, 10, 11], 10: [7, 9, 11, 15, 20],
        11: [8, 9, 10, 12, 13, 19, 20], 12: [8, 11, 13, 14], 13: [11, 12, 14, 19], 14: [12, 13, 19, 22],
        15: [6, 7, 10, 16, 20], 16: [15, 17, 20, 21], 17: [16, 18, 21], 18: [17, 21, 25, 26],
        19: [11, 13, 14, 20, 22], 20: [10, 11, 15, 16, 19, 21, 22, 23], 21: [16, 17, 18, 20, 23, 24, 25],
        22: [14, 19, 20, 23], 23: [20, 21, 22, 24], 24: [21, 23, 25, 26, 29, 30], 25: [18, 21, 24, 26],
        26: [18, 24, 25, 27, 28, 29], 27: [26, 28, 29, 30], 28: [26, 27, 31, 33, 36], 29: [24, 26, 27, 30],
        30: [24, 27, 29], 31: [28, 32, 33, 34], 32: [31, 34, 35], 33: [28, 31, 34, 37],
        34: [31, 32, 33, 35, 38], 35: [32, 34, 40], 36: [28, 37, 38, 39], 37: [33, 36, 38],
        38: [34, 36, 37, 39], 39: [36, 38], 40: [35, 41, 43, 44], 41: [40, 42], 42: [41],
        43: [40, 44, 45, 46], 44: [40, 43, 45], 45: [43, 44, 46], 46: [43, 45], 47: [], 48: [],
    ]
}
