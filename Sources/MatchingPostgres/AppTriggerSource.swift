/// What one of the app's `BEFORE UPDATE` row triggers on `profiles` may do to the row it returns, read from its
/// function's source: whether it may set a column the change capture watches. `UPDATE OF` looks only at the
/// statement's SET list, so a watched value such a trigger sets (say `has_introduction` from the text) is no
/// change to a capture installed with it. A trigger that may set one needs the capture that compares every
/// updated row (about 0.7 of the app's login throughput); one that only keeps `updated_at`, the usual kind, does
/// not. Before session 35 every such trigger counted, so an app's `set_updated_at` trigger cost it its logins'
/// speed for nothing, and a run warned about it.
///
/// Read conservatively, since a wrong "sets none" loses changes and a wrong "may set" only costs speed: anything
/// but PL/pgSQL may set anything. In PL/pgSQL (comments and string literals left out, a quoted name read as its
/// text) a trigger may set a watched value when it
/// - names a watched field of `NEW` at all (`NEW.status := 2`, but also `GET DIAGNOSTICS NEW.status = ...`,
///   `FOR NEW.status IN ...`, `CALL p(NEW.status)` with an `INOUT` parameter: a read cannot be told from these
///   by a reading this simple, so reading a watched value counts too);
/// - uses `NEW` as a whole other than to return it, compare it (`NEW IS DISTINCT FROM OLD`) or pass it to a
///   function (`to_jsonb(NEW)`, by value): `NEW := ...`, `INTO NEW`, `FOR NEW IN`, `r ALIAS FOR NEW`;
/// - calls a procedure (`CALL`: an `INOUT` argument is written back);
/// - returns anything but `NEW`, `OLD` or `NULL` (and `OLD` only as it came: the same rules as for `NEW`);
/// - writes a name in Unicode escapes (`U&"..."`), or lets a query's columns shadow its variables
///   (`#variable_conflict`, under which `NEW = old FROM ...` assigns).
/// A first version looked for assignments only, and missed the forms after the first; a second missed
/// `RETURN(...)`, `U&` names, `NEW = old FROM ...` and names with `$` (two reviews of session 35). A function
/// compiled with `standard_conforming_strings` off reads `'\''` otherwise than this reading does.
package enum AppTriggerSource {
    /// Why a trigger function in `language` with `source` may set one of `watched`; nil when it cannot.
    package static func mayChangeWatched(language: String, source: String, watched: [String]) -> String? {
        guard language.lowercased() == "plpgsql" else {
            return "its function is in \(language), which the worker does not read"
        }
        let code = withoutCommentsAndStrings(source).lowercased()
        if firstMatch(#"u&"#, in: code) {
            return "it writes a name in Unicode escapes (U&\"...\"), which the worker does not read"
        }
        if firstMatch(#"#variable_conflict"#, in: code) {
            return "it lets a query's columns shadow its variables (#variable_conflict)"
        }
        if firstMatch(#"\bcall\b"#, in: code) {
            return "it calls a procedure, which may set NEW through an INOUT argument"
        }
        if let reason = mayChange("new", in: code, watched: watched) { return reason }
        // A row returned as OLD is what it holds then.
        if firstMatch(#"\breturn\s*\(?\s*old\b"#, in: code),
            let reason = mayChange("old", in: code, watched: watched)
        {
            return reason + ", and returns OLD"
        }
        if firstMatch(#"\breturn\b(?!\s*\(?\s*(?:new|old|null)\s*\)?\s*;)"#, in: code) {
            return "it returns a row other than NEW"
        }
        return nil
    }

    /// Why `code` may change the row variable `row` (`new` or `old`): one of `watched` named as its field, or the
    /// row used as a whole other than returned, compared (in a condition) or passed to one function by value.
    private static func mayChange(_ row: String, in code: String, watched: [String]) -> String? {
        let names = watched.map { escaped($0.lowercased()) }.joined(separator: "|")
        let other = row == "new" ? "old" : "new"
        let shown = row.uppercased()
        if let column = firstCapture(#"\b"# + row + #"\s*\.\s*("# + names + #")\b"#, in: code) {
            return "it names \(shown).\(column)"
        }
        // A comparison only where a condition is: `NEW = OLD FROM ...` at a statement's start is an assignment.
        let condition = #"(?:\bif|\belsif|\belseif|\bwhen|\bwhile|\band|\bor|\bnot|\()\s*"#
        let harmless = [
            #"\breturn\s*\(?\s*"# + row + #"\s*\)?\s*;"#,
            #"\b"# + row + #"\s+is\s+(?:not\s+)?distinct\s+from\s+"# + other + #"\b"#,
            #"\b"# + other + #"\s+is\s+(?:not\s+)?distinct\s+from\s+"# + row + #"\b"#,
            condition + row + #"\s*(?:=|<>|!=)\s*"# + other + #"\b"#,
            condition + other + #"\s*(?:=|<>|!=)\s*"# + row + #"\b"#,
            #"\b(?!call\b|return\b)[a-z_][a-z0-9_$]*\s*\(\s*"# + row + #"\s*\)"#,
        ]
        let rest = harmless.reduce(code) { text, pattern in replacing(pattern, in: text) }
        if firstMatch(#"\b"# + row + #"\b(?!\s*\.)"#, in: rest) {
            return "it uses \(shown) as a whole (assigned, aliased, looped or selected into)"
        }
        return nil
    }

    /// `source` with every comment and string literal (quoted, `E'...'`, dollar-quoted) replaced by a space,
    /// and each quoted identifier by its text: what is left is code.
    package static func withoutCommentsAndStrings(_ source: String) -> String {
        let text = Array(source.unicodeScalars)
        var out = String.UnicodeScalarView()
        var i = 0
        func at(_ offset: Int) -> Unicode.Scalar? { i + offset < text.count ? text[i + offset] : nil }
        while i < text.count {
            let c = text[i]
            if c == "-", at(1) == "-" {
                while i < text.count, text[i] != "\n" { i += 1 }
                out.append(" ")
            } else if c == "/", at(1) == "*" {
                var depth = 0
                repeat {
                    if text[i] == "/", at(1) == "*" {
                        depth += 1
                        i += 2
                    } else if text[i] == "*", at(1) == "/" {
                        depth -= 1
                        i += 2
                    } else {
                        i += 1
                    }
                } while depth > 0 && i < text.count
                out.append(" ")
            } else if c == "'" {
                // A backslash escapes only in an E'' string (E right before the quote, and not the end of a
                // name: `name'\'` is a typed literal); '' is a quote in both.
                let escapes =
                    i > 0 && (text[i - 1] == "e" || text[i - 1] == "E")
                    && !(i > 1 && (isIdentifier(text[i - 2]) || text[i - 2] == "$"))
                i += 1
                while i < text.count {
                    if escapes, text[i] == "\\" {
                        i += 2
                    } else if text[i] == "'" {
                        if at(1) == "'" { i += 2 } else { break }
                    } else {
                        i += 1
                    }
                }
                i += 1
                out.append(" ")
            } else if c == "\"" {
                out.append(" ")
                i += 1
                while i < text.count {
                    if text[i] == "\"" {
                        if at(1) == "\"" {
                            out.append("\"")
                            i += 2
                        } else {
                            break
                        }
                    } else {
                        out.append(text[i])
                        i += 1
                    }
                }
                i += 1
                out.append(" ")
            } else if c == "$", let tag = dollarTag(text, from: i) {
                i += tag.count
                while i < text.count, !matches(text, at: i, tag) { i += 1 }
                i += tag.count
                out.append(" ")
            } else {
                out.append(c)
                i += 1
            }
        }
        return String(out)
    }

    /// The dollar-quote tag (`$$`, `$name$`) that starts at `start`, if one does: a `$` after an identifier's
    /// character is part of the identifier (`a$b`), and `$1` is a parameter.
    private static func dollarTag(_ text: [Unicode.Scalar], from start: Int) -> [Unicode.Scalar]? {
        // `$` continues an identifier too (`a$$$` is a name, not `a$` and a `$$` quote).
        if start > 0, isIdentifier(text[start - 1]) || text[start - 1] == "$" { return nil }
        var end = start + 1
        while end < text.count, text[end] != "$" {
            guard isIdentifier(text[end]), !(end == start + 1 && ("0"..."9").contains(text[end])) else { return nil }
            end += 1
        }
        return end < text.count ? Array(text[start...end]) : nil
    }

    private static func isIdentifier(_ c: Unicode.Scalar) -> Bool {
        c == "_" || ("a"..."z").contains(c) || ("A"..."Z").contains(c) || ("0"..."9").contains(c) || c.value > 127
    }

    private static func matches(_ text: [Unicode.Scalar], at start: Int, _ tag: [Unicode.Scalar]) -> Bool {
        start + tag.count <= text.count && Array(text[start..<start + tag.count]) == tag
    }

    private static func firstMatch(_ pattern: String, in code: String) -> Bool {
        // Simple word boundaries: Unicode's would read `new.status` as one word.
        guard let regex = try? Regex(pattern).wordBoundaryKind(.simple) else { return true }
        return code.firstMatch(of: regex) != nil
    }

    private static func replacing(_ pattern: String, in code: String) -> String {
        guard let regex = try? Regex(pattern).wordBoundaryKind(.simple) else { return code }
        return code.replacing(regex, with: " ")
    }

    private static func firstCapture(_ pattern: String, in code: String) -> String? {
        guard let regex = try? Regex(pattern).wordBoundaryKind(.simple) else { return "?" }
        guard let match = code.firstMatch(of: regex), match.output.count > 1,
            let column = match.output[1].substring
        else { return nil }
        return String(column)
    }

    private static func escaped(_ name: String) -> String {
        name.unicodeScalars.map { isIdentifier($0) ? String($0) : "\\" + String($0) }.joined()
    }
}
