import CLibPQ
import Foundation

extension PostgresConnection {
    /// A keyword/value connection string equal to `base` (keywords or a postgresql:// URI; nil or ""
    /// for libpq's defaults) with `overriding` applied, for example `["dbname": "other"]`.
    /// Throws `.usage` when libpq cannot parse `base`.
    public static func conninfo(_ base: String?, overriding: [String: String]) throws -> String {
        var pairs: [(String, String)] = []
        if let base, !base.isEmpty {
            guard let parsed = ConnectionString.parse(base) else {
                throw PostgresError(kind: .usage, message: "libpq cannot parse the connection string")
            }
            pairs = parsed
        }
        for (key, value) in overriding.sorted(by: { $0.key < $1.key }) {
            if let index = pairs.firstIndex(where: { $0.0 == key }) {
                pairs[index].1 = value
            } else {
                pairs.append((key, value))
            }
        }
        return pairs.map { "\($0.0)=\(ConnectionString.quote($0.1))" }.joined(separator: " ")
    }
}

extension PostgresConnection {
    /// The value `conninfo` (a keyword string or URI) gives `keyword`, if it gives one and libpq can read it.
    public static func setting(_ keyword: String, in conninfo: String) -> String? {
        ConnectionString.parse(conninfo)?.last { $0.0 == keyword }?.1
    }

    /// `text` with the passwords of `conninfo` (also a malformed one), the given `passwords`, and
    /// anything that looks like `password=…` or `user:…@` masked: for messages that may quote them.
    public static func redactingSecrets(_ text: String, conninfo: String?, passwords: [String] = []) -> String {
        ConnectionString.redact(text, secrets: (conninfo.map(ConnectionString.secrets(in:)) ?? []) + passwords)
    }
}

/// libpq connection string helpers: parsing, and keeping passwords out of error messages.
enum ConnectionString {
    /// The keywords `conninfo` sets, in libpq's order, or nil when libpq cannot parse it.
    static func parse(_ conninfo: String) -> [(String, String)]? {
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &errorMessage) else {
            if let errorMessage { PQfreemem(errorMessage) }
            return nil
        }
        defer { PQconninfoFree(options) }
        return pairs(options)
    }

    private static func pairs(_ options: UnsafeMutablePointer<PQconninfoOption>) -> [(String, String)] {
        var result: [(String, String)] = []
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val {
                result.append((String(cString: keyword), String(cString: value)))
            }
            option += 1
        }
        return result
    }

    /// Whether `conninfo`, given to libpq as "dbname" with expand_dbname, names a database:
    /// a plain name does; a connection string does when it sets dbname (or cannot be parsed,
    /// in which case libpq reports the error).
    static func namesDatabase(_ conninfo: String) -> Bool {
        let isConnectionString =
            conninfo.contains("=")
            || conninfo.hasPrefix("postgresql://") || conninfo.hasPrefix("postgres://")
        guard isConnectionString else { return true }
        guard let pairs = parse(conninfo) else { return true }
        return pairs.contains { $0.0 == "dbname" && !$0.1.isEmpty }
    }

    static func quote(_ value: String) -> String {
        let escaped = value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'")
        return "'\(escaped)'"
    }

    /// The password a (possibly failed) PGconn was given.
    static func secrets(of connection: OpaquePointer) -> [String] {
        guard let options = PQconninfo(connection) else { return [] }
        defer { PQconninfoFree(options) }
        return pairs(options).filter { $0.0 == "password" }.map(\.1)
    }

    /// Passwords in a connection string, also a malformed one (whose fragments libpq may quote).
    static func secrets(in conninfo: String) -> [String] {
        var found = parse(conninfo)?.filter { $0.0 == "password" }.map(\.1) ?? []
        for match in conninfo.matches(of: #/password\s*=\s*'((?:[^'\\]|\\.)*)'/#) {
            found.append(String(match.output.1))
        }
        for match in conninfo.matches(of: #/password\s*=\s*([^\s&']+)/#) {
            found.append(String(match.output.1))
        }
        for match in conninfo.matches(of: #/://[^/@:]*:([^@/]*)@/#) {
            found.append(String(match.output.1))
            found.append(String(match.output.1).removingPercentEncoding ?? "")
        }
        // A password with spaces, not quoted (`password=correct horse staple`): libpq takes its first word and
        // quotes the next as a keyword it misses an `=` after. Every word up to the next `keyword=`.
        for match in conninfo.matches(of: #/password\s*=\s*([^'\s][^=']*?)(?=\s+[A-Za-z_]+\s*=|\s*$)/#) {
            let words = String(match.output.1)
            found.append(words)
            found += words.split(whereSeparator: \.isWhitespace).map(String.init)
        }
        // `user:password@` wherever it stands: also in a URI libpq does not take for one (a scheme mistyped, or
        // none), which it reads as a database name and quotes whole.
        for match in conninfo.matches(of: #/:([^\s@:]+)@/#) {
            found.append(String(match.output.1))
        }
        // A password holding an unencoded `@` or `/` (`unencodedUserInfo`): all of it up to the last `@`, and
        // the pieces libpq may quote as host, port or database.
        for match in conninfo.matches(of: #/://[^/@:]*:([^?]*)@/#) {
            let password = String(match.output.1)
            found.append(password)
            found += password.split(whereSeparator: { "@/:?#".contains($0) }).map(String.init)
        }
        return found
    }

    /// What is wrong with a `postgresql://` URI whose user or password holds a character that must be
    /// percent-encoded there (`@ / ? #`): libpq reads the rest of the password as the host, port or database
    /// and quotes it in its errors. Nil when there is no such URI. The answer echoes nothing of the URI.
    static func unencodedUserInfo(in conninfo: String) -> String? {
        let text = conninfo.trimmingCharacters(in: .whitespaces)
        guard let scheme = ["postgresql://", "postgres://"].first(where: { text.hasPrefix($0) }) else { return nil }
        let rest = text.dropFirst(scheme.count)
        let beforeQuery = rest.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? rest
        guard let lastAt = beforeQuery.lastIndex(of: "@") else { return nil }
        let userInfo = beforeQuery[..<lastAt]
        guard userInfo.contains(where: { "@/?#".contains($0) }) else { return nil }
        return "the URI's user or password holds a character that must be percent-encoded there "
            + "(@ as %40, / as %2F, ? as %3F, # as %23): libpq would read part of it as the host or database"
    }

    /// `text` without the given secrets and without anything that looks like `password=…`.
    static func redact(_ text: String, secrets: [String]) -> String {
        var text = text
        // Longest first: a piece of a password replaced first would leave the rest of it unmatched.
        for secret in Set(secrets).sorted(by: { $0.count > $1.count }) where secret.count >= 3 {
            text = text.replacingOccurrences(of: secret, with: "********")
        }
        text.replace(#/password\s*=\s*('(?:[^'\\]|\\.)*'|[^\s&']+)/#, with: "password=********")
        text.replace(#/(://[^/@:\s]*):[^@/\s]*@/#) { "\($0.output.1):********@" }
        return text
    }

    /// A URI libpq will not take for one: `user:password@host/db` with no scheme, or a scheme mistyped
    /// (`postgresql:/…`, `postgres:`), which libpq reads whole as a database name. Nil otherwise. The answer
    /// echoes nothing of the string.
    static func unrecognizedURI(in conninfo: String) -> String? {
        let text = conninfo.trimmingCharacters(in: .whitespaces)
        guard !text.isEmpty, !text.contains("="), !text.contains(where: \.isWhitespace),
            !["postgresql://", "postgres://"].contains(where: { text.hasPrefix($0) }),
            text.contains("@") || ["postgres:", "postgresql:"].contains(where: text.lowercased().hasPrefix)
        else { return nil }
        return "the connection string looks like a URI but does not begin with postgresql:// or postgres://, "
            + "so libpq reads all of it, password included, as a database name (masked here)"
    }

    /// libpq's words about a connection string it could not parse, with every quoted fragment of the string
    /// replaced by "…" unless it is a connection keyword: the fragments may be pieces of a password. A keyword
    /// misspelled in `conninfo` is not echoed either, but the keyword it is nearest to is suggested.
    static func withoutQuotedFragments(_ reason: String, conninfo: String = "") -> String {
        let dropped = reason.replacing(#/"([^"]*)"/#) { match in
            let fragment = String(match.output.1)
            return fragment == "=" || keywords.contains(fragment) ? "\"\(fragment)\"" : "\"…\""
        }
        guard reason.contains("invalid connection option") else { return dropped }
        let unknown = conninfo.matches(of: #/(?:^|\s)([A-Za-z_]+)\s*=/#).map { String($0.output.1) }
            .filter { !keywords.contains($0) }
        let suggestions = unknown.compactMap { key in
            keywords.map { ($0, editDistance(key.lowercased(), $0)) }.filter { $0.1 <= 2 }.min { $0.1 < $1.1 }?.0
        }
        return suggestions.isEmpty ? dropped : dropped + " (did you mean \(suggestions.joined(separator: ", "))?)"
    }

    /// Levenshtein distance, for suggesting a keyword.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var previous = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...max(1, b.count) where !b.isEmpty {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return a.isEmpty ? b.count : previous[b.count]
    }

    /// libpq's connection keywords (`PQconndefaults`).
    static let keywords: Set<String> = {
        guard let options = PQconndefaults() else { return [] }
        defer { PQconninfoFree(options) }
        var found = Set<String>()
        var option = options
        while let keyword = option.pointee.keyword {
            found.insert(String(cString: keyword))
            option += 1
        }
        return found
    }()
}
