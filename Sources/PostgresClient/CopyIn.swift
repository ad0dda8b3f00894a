import CLibPQ
import Chronology

extension PostgresConnection {
    /// Runs `COPY … FROM STDIN (FORMAT binary)` (`sql` is the whole statement); `body` appends rows
    /// to the writer, which sends them in large chunks. Returns the number of rows written.
    ///
    /// If `body` throws, the COPY is aborted (nothing is written) and the error rethrown.
    @discardableResult
    public func copyIn(_ sql: String, _ body: (BinaryCopyWriter) throws -> Void) throws -> Int {
        try withConnection { connection in
            let start = PQexec(connection, sql)
            defer { PQclear(start) }
            guard PQresultStatus(start) == PGRES_COPY_IN else {
                try check(start, connection)
                throw PostgresError(kind: .usage, message: "copyIn needs a COPY … FROM STDIN statement")
            }
            let writer = BinaryCopyWriter(connection: connection)
            writer.didSend = { [self] in madeProgress() }
            defer { writer.detach() }
            do {
                try body(writer)
            } catch {
                abortCopyIn(connection, reason: "COPY aborted by the client: \(error)")
                throw error
            }
            writer.finish()
            if let misuse = writer.misuse {
                abortCopyIn(connection, reason: "COPY aborted by the client: \(misuse)")
                throw PostgresError(kind: .usage, message: misuse)
            }
            let sendFailure = writer.sendFailure
            if sendFailure == nil, PQputCopyEnd(connection, nil) != 1 {
                let failure = connectionError(connection)
                _ = finishResults(connection)
                throw failure
            }
            // The server's own error (a constraint, a malformed value) explains a failed send best.
            if let error = finishResults(connection) { throw error }
            if let sendFailure {
                throw PostgresError(kind: .copy, message: "sending COPY data failed: \(sendFailure)")
            }
            return writer.rowCount
        }
    }
}

/// Encodes rows in PostgreSQL's binary COPY format for `copyIn`: call `beginRow(fieldCount:)`, then
/// one `write` per field. Data is buffered and sent with PQputCopyData about every MiB.
///
/// The buffer is raw memory written with unaligned big-endian stores: appending to a `[UInt8]`
/// costs about ten times more per field.
public final class BinaryCopyWriter {
    private static let flushThreshold = 1 << 20

    private var storage: UnsafeMutableRawPointer
    private var capacity: Int
    /// Bytes buffered.
    private var count = 0
    private var connection: OpaquePointer?
    /// Fields still to be written in the current row (negative: too many were written).
    private var fieldsRemaining = 0
    /// Rows begun so far.
    public private(set) var rowCount = 0
    /// The first misuse (wrong field count), reported by `copyIn` as `.usage`.
    private(set) var misuse: String?
    /// libpq's message when sending failed; the rest of the data is dropped.
    private(set) var sendFailure: String?
    /// Called after each chunk is handed to libpq (progress for the call deadline).
    var didSend: (() -> Void)?

    init(connection: OpaquePointer) {
        self.connection = connection
        capacity = Self.flushThreshold + 64 * 1024
        storage = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        let signature: [UInt8] = Array("PGCOPY\n".utf8) + [0xFF, 0x0D, 0x0A, 0x00]
        append(signature)
        reserve(8)
        put(UInt32(0))  // flags
        put(UInt32(0))  // header extension length
    }

    deinit { storage.deallocate() }

    // MARK: Buffer

    @inline(__always)
    private func reserve(_ bytes: Int) {
        if count + bytes > capacity { grow(to: count + bytes) }
    }

    @inline(never)
    private func grow(to minimum: Int) {
        let newCapacity = max(capacity * 2, minimum)
        let newStorage = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        newStorage.copyMemory(from: storage, byteCount: count)
        storage.deallocate()
        storage = newStorage
        capacity = newCapacity
    }

    /// Stores without checking capacity: call `reserve` first.
    @inline(__always)
    private func put<T: FixedWidthInteger>(_ value: T) {
        storage.storeBytes(of: value.bigEndian, toByteOffset: count, as: T.self)
        count += MemoryLayout<T>.size
    }

    @inline(__always)
    private func put(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        (storage + count).copyMemory(from: base, byteCount: bytes.count)
        count += bytes.count
    }

    private func append(_ bytes: [UInt8]) {
        reserve(bytes.count)
        bytes.withUnsafeBytes { put($0) }
    }

    /// The UTF-8 bytes of `string` (capacity reserved by the caller).
    @inline(__always)
    private func put(utf8 string: String) {
        let copied: Void? = string.utf8.withContiguousStorageIfAvailable { put(UnsafeRawBufferPointer($0)) }
        if copied == nil {
            for byte in string.utf8 { put(byte) }
        }
    }

    // MARK: Rows

    /// Ends the current row's bookkeeping; records a misuse when its field count was wrong.
    private func checkRowComplete() {
        if fieldsRemaining != 0, misuse == nil {
            misuse =
                fieldsRemaining > 0
                ? "row \(rowCount) has \(fieldsRemaining) fields fewer than its beginRow(fieldCount:)"
                : "row \(rowCount) has \(-fieldsRemaining) fields more than its beginRow(fieldCount:)"
        }
    }

    public func beginRow(fieldCount: Int) {
        if fieldsRemaining != 0 { checkRowComplete() }
        if count >= Self.flushThreshold { flush() }
        guard let fields = Int16(exactly: fieldCount), fields >= 0 else {
            misuse = misuse ?? "invalid field count \(fieldCount)"
            return
        }
        rowCount += 1
        fieldsRemaining = fieldCount
        reserve(2)
        put(fields)
    }

    /// Writes the trailer and sends what is buffered.
    func finish() {
        checkRowComplete()
        reserve(2)
        put(Int16(-1))
        flush()
    }

    /// After `copyIn` returns, the writer no longer sends anything.
    func detach() {
        connection = nil
        didSend = nil
        count = 0
    }

    private func flush() {
        defer { count = 0 }
        guard let connection, misuse == nil, sendFailure == nil else { return }
        var sent = 0
        while sent < count {
            let length = min(count - sent, 1 << 30)  // only a row of huge fields exceeds the threshold by much
            guard PQputCopyData(connection, (storage + sent).assumingMemoryBound(to: CChar.self), Int32(length)) == 1
            else {
                sendFailure = singleLine(String(cString: PQerrorMessage(connection)))
                return
            }
            sent += length
            didSend?()
        }
    }

    /// Starts a fixed-size field: its length prefix, with room for the value.
    @inline(__always)
    private func field(length: Int) {
        fieldsRemaining -= 1
        reserve(4 + length)
        put(Int32(truncatingIfNeeded: length))
    }

    /// Starts a variable-length field; false (and a misuse) when it exceeds what a field can hold.
    @inline(__always)
    private func field(variableLength length: Int) -> Bool {
        guard length <= Int(Int32.max) else {
            misuse = misuse ?? "a field of \(length) bytes is too large"
            fieldsRemaining -= 1
            return false
        }
        field(length: length)
        return true
    }

    // MARK: Fields

    public func writeNull() {
        fieldsRemaining -= 1
        reserve(4)
        put(Int32(-1))
    }

    public func write(_ v: Int16) {
        field(length: 2)
        put(v)
    }

    public func write(_ v: Int32) {
        field(length: 4)
        put(v)
    }

    public func write(_ v: Int64) {
        field(length: 8)
        put(v)
    }

    public func write(_ v: Bool) {
        field(length: 1)
        put(UInt8(v ? 1 : 0))
    }

    public func write(_ v: Double) {
        field(length: 8)
        put(v.bitPattern)
    }

    /// text (also for varchar columns).
    public func write(_ v: String) {
        guard field(variableLength: v.utf8.count) else { return }
        put(utf8: v)
    }

    /// jsonb in binary: the version byte 1, then the JSON text.
    public func writeJSONB(_ json: String) {
        guard field(variableLength: 1 + json.utf8.count) else { return }
        put(UInt8(1))
        put(utf8: json)
    }

    public func write(_ v: CalendarDate) {
        field(length: 4)
        put(v.postgresDays)
    }

    public func write(_ v: Timestamp) {
        field(length: 8)
        put(v.postgresMicroseconds)
    }

    public func write(_ v: PostgresInterval) {
        field(length: 16)
        put(v.microseconds)
        put(v.days)
        put(v.months)
    }

    /// A one-dimensional int2[] (lower bound 1, no NULL elements); empty is written with ndim 0.
    public func write(_ v: [Int16]) { writeArray(v, elementOID: PostgresOID.int2) }
    public func write(_ v: [Int32]) { writeArray(v, elementOID: PostgresOID.int4) }
    public func write(_ v: [Int64]) { writeArray(v, elementOID: PostgresOID.int8) }

    @inline(__always)
    private func writeArray<T: FixedWidthInteger>(_ values: [T], elementOID: UInt32) {
        guard field(variableLength: BinaryEncoding.arraySize(values)) else { return }
        put(Int32(values.isEmpty ? 0 : 1))  // dimensions
        put(Int32(0))  // has NULLs
        put(elementOID)
        guard !values.isEmpty else { return }
        put(Int32(values.count))
        put(Int32(1))  // lower bound
        for value in values {
            put(Int32(MemoryLayout<T>.size))
            put(value)
        }
    }

    /// A one-dimensional text[].
    public func write(_ v: [String]) {
        guard field(variableLength: BinaryEncoding.textArraySize(v)) else { return }
        put(Int32(v.isEmpty ? 0 : 1))
        put(Int32(0))
        put(PostgresOID.text)
        guard !v.isEmpty else { return }
        put(Int32(v.count))
        put(Int32(1))
        for element in v {
            put(Int32(element.utf8.count))
            put(utf8: element)
        }
    }

    public func write(_ v: Int16?) { if let v { write(v) } else { writeNull() } }
    public func write(_ v: Int32?) { if let v { write(v) } else { writeNull() } }
    public func write(_ v: Int64?) { if let v { write(v) } else { writeNull() } }
    public func write(_ v: Bool?) { if let v { write(v) } else { writeNull() } }
    public func write(_ v: Double?) { if let v { write(v) } else { writeNull() } }
    public func write(_ v: String?) { if let v { write(v) } else { writeNull() } }
    public func writeJSONB(_ json: String?) { if let json { writeJSONB(json) } else { writeNull() } }
    public func write(_ v: CalendarDate?) { if let v { write(v) } else { writeNull() } }
    public func write(_ v: Timestamp?) { if let v { write(v) } else { writeNull() } }
    public func write(_ v: PostgresInterval?) { if let v { write(v) } else { writeNull() } }
    public func write(_ v: [Int16]?) { if let v { write(v) } else { writeNull() } }
    public func write(_ v: [Int32]?) { if let v { write(v) } else { writeNull() } }
    public func write(_ v: [Int64]?) { if let v { write(v) } else { writeNull() } }
    public func write(_ v: [String]?) { if let v { write(v) } else { writeNull() } }

    /// Any value, in the binary format of its case (`.other` bytes as they are).
    public func write(_ v: PostgresValue) {
        switch v {
        case .null: writeNull()
        case .bool(let x): write(x)
        case .int2(let x): write(x)
        case .int4(let x): write(x)
        case .int8(let x): write(x)
        case .float8(let x): write(x)
        case .text(let x): write(x)
        case .jsonb(let x): writeJSONB(x)
        case .date(let x): write(x)
        case .timestamptz(let x): write(x)
        case .interval(let x): write(x)
        case .int2Array(let x): write(x)
        case .int4Array(let x): write(x)
        case .int8Array(let x): write(x)
        case .textArray(let x): write(x)
        case .other(_, let bytes):
            guard field(variableLength: bytes.count) else { return }
            bytes.withUnsafeBytes { put($0) }
        }
    }
}
