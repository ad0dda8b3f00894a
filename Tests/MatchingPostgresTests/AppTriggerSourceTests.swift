import MatchingPostgres
import Testing

/// Which of the app's `BEFORE UPDATE` trigger functions may set a watched column, read from their source: one
/// that may needs the capture that compares every updated row, one that cannot keeps the app's logins free.
@Suite struct AppTriggerSourceTests {
    private let watched = ["id", "status", "height_cm", "has_introduction", "languages"]

    private func reason(_ source: String, language: String = "plpgsql") -> String? {
        AppTriggerSource.mayChangeWatched(language: language, source: source, watched: watched)
    }

    @Test func aTriggerThatKeepsUpdatedAtSetsNone() {
        #expect(reason("BEGIN NEW.updated_at := now(); RETURN NEW; END") == nil)
        #expect(reason("begin new.updated_at = clock_timestamp(); return new; end") == nil)
        // The usual idiom: NEW compared with OLD, or handed to a function by value, cannot change.
        #expect(
            reason(
                """
                BEGIN
                  IF NEW IS DISTINCT FROM OLD THEN NEW.updated_at := now(); END IF;
                  IF NEW = OLD THEN RETURN NULL; END IF;
                  PERFORM pg_notify('profiles', row_to_json(NEW)::text);
                  INSERT INTO app_audit (profile_id, row) VALUES (NEW.id_hash, to_jsonb(NEW));
                  RETURN NEW;
                END
                """) == nil)
        // Written in comments and strings only.
        #expect(
            reason(
                """
                BEGIN
                  -- NEW.status := 2;
                  /* NEW.height_cm := 170; /* nested */ RETURN OLD2; */
                  RAISE NOTICE 'NEW.status := %', NEW.updated_at;
                  PERFORM $q$ NEW.has_introduction := true $q$;
                  RETURN NEW;
                END
                """) == nil)
        #expect(reason("BEGIN RETURN NULL; END") == nil)
    }

    @Test func aTriggerThatSetsAWatchedValueIsNamedWithTheColumn() {
        #expect(
            reason("BEGIN NEW.has_introduction := coalesce(NEW.introduction, '') <> ''; RETURN NEW; END")
                == "it names NEW.has_introduction")
        #expect(
            reason("BEGIN\n  NEW.updated_at := now();\n  -- derived\n  NEW.status = 2;\n  RETURN NEW;\nEND")
                == "it names NEW.status")
        #expect(
            reason(#"BEGIN IF x THEN NEW . "height_cm" := 170; END IF; RETURN NEW; END"#) == "it names NEW.height_cm")
        #expect(reason("BEGIN NEW.languages[1] := 1; RETURN NEW; END") == "it names NEW.languages")
        #expect(reason("BEGIN SELECT a, b INTO v, NEW.status FROM t; RETURN NEW; END") == "it names NEW.status")
        // Review of session 35: forms other than an assignment set a field too, so naming one counts, a read
        // included (a reading this simple cannot tell them apart).
        #expect(reason("BEGIN GET DIAGNOSTICS NEW.status = ROW_COUNT; RETURN NEW; END") == "it names NEW.status")
        #expect(reason("BEGIN FOR NEW.status IN SELECT 2 LOOP END LOOP; RETURN NEW; END") == "it names NEW.status")
        #expect(
            reason("BEGIN FOREACH NEW.status IN ARRAY ARRAY[2] LOOP END LOOP; RETURN NEW; END")
                == "it names NEW.status")
        #expect(
            reason("BEGIN CALL set_two(NEW.status); RETURN NEW; END")
                == "it calls a procedure, which may set NEW through an INOUT argument")
        #expect(
            reason("BEGIN IF NEW.status = 4 THEN NEW.deleted_on := current_date; END IF; RETURN NEW; END")
                == "it names NEW.status")
        // A typed literal ending in e is no E'' string: what follows it is code.
        #expect(
            reason(#"DECLARE d name; BEGIN d := name'\'; NEW.status := 2; d := ''; RETURN NEW; END"#)
                == "it names NEW.status")
    }

    @Test func aTriggerThatReplacesTheRowMaySetAnything() {
        let whole = "it uses NEW as a whole (assigned, aliased, looped or selected into)"
        #expect(reason("BEGIN NEW := jsonb_populate_record(NEW, '{}'); RETURN NEW; END") == whole)
        #expect(reason("BEGIN SELECT * INTO NEW FROM app_defaults(NEW); RETURN NEW; END") == whole)
        #expect(reason("DECLARE r ALIAS FOR NEW; BEGIN r.status := 2; RETURN NEW; END") == whole)
        #expect(reason("BEGIN FOR NEW IN SELECT * FROM profiles LOOP END LOOP; RETURN NEW; END") == whole)
        #expect(
            reason("BEGIN CALL app_fix(NEW); RETURN NEW; END")
                == "it calls a procedure, which may set NEW through an INOUT argument")
        #expect(reason("DECLARE r profiles; BEGIN r := NEW; r.status := 1; RETURN r; END") == whole)
        #expect(reason("BEGIN RETURN app_fix(NEW); END") == "it returns a row other than NEW")
        #expect(reason("BEGIN SELECT 1 INTO STRICT NEW.updated_at; RETURN NEW; END") == nil)
        #expect(
            reason("NEW.status := 1", language: "plpython3u")
                == "its function is in plpython3u, which the worker does not read")
        #expect(reason("SELECT 1", language: "sql") != nil)
        #expect(reason("app_trigger", language: "c") != nil)
    }

    /// The final review of session 35: bodies that set `status` on PostgreSQL 15 and read as setting none.
    @Test func theLastReviewsBodiesMaySetAWatchedValue() {
        #expect(
            reason(#"BEGIN RETURN(jsonb_populate_record(NULL::profiles, to_jsonb(NEW) || '{"status":2}')); END"#)
                == "it returns a row other than NEW")
        #expect(
            reason(
                #"DECLARE r profiles; BEGIN r := jsonb_populate_record(NULL::profiles, to_jsonb(NEW) || '{"status":2}'); RETURN"r"; END"#
            ) == "it returns a row other than NEW")
        #expect(reason(#"BEGIN NEW.U&"status" := 2; RETURN NEW; END"#)?.contains("Unicode escapes") == true)
        #expect(
            reason(
                "#variable_conflict use_column\nBEGIN NEW = old FROM (SELECT 2 AS status) old; RETURN NEW; END")
                != nil)
        #expect(
            reason("BEGIN NEW = OLD; RETURN NEW; END")
                == "it uses NEW as a whole (assigned, aliased, looped or selected into)")
        #expect(
            reason(#"BEGIN IF false THEN PERFORM a$e'\'; END IF; NEW.status := 2; PERFORM 'x'; RETURN NEW; END"#)
                == "it names NEW.status")
        #expect(reason("DECLARE a$$$ int; BEGIN NEW.status := 2; a$$$ := 1; RETURN NEW; END") == "it names NEW.status")
        #expect(reason("BEGIN OLD.status := 2; RETURN OLD; END") == "it names OLD.status, and returns OLD")
        // Still none: the usual forms, RETURN(NEW) included.
        #expect(reason("BEGIN IF NEW = OLD THEN RETURN NULL; END IF; NEW.updated_at := now(); RETURN(NEW); END") == nil)
        // OLD returned is read by NEW's rules, conservatively: a read of OLD.status counts.
        #expect(
            reason("BEGIN IF OLD.status = 4 THEN RETURN OLD; END IF; RETURN NEW; END")
                == "it names OLD.status, and returns OLD")
    }

    @Test func stringsAndQuotedNamesAreReadAsPostgreSQLReadsThem() {
        #expect(AppTriggerSource.withoutCommentsAndStrings("a 'it''s -- not a comment' b") == "a   b")
        #expect(AppTriggerSource.withoutCommentsAndStrings(#"a E'\' NEW.x := 1' b"#) == "a E  b")
        #expect(AppTriggerSource.withoutCommentsAndStrings(#"NEW."Height""cm""#) == #"NEW. Height"cm "#)
        #expect(AppTriggerSource.withoutCommentsAndStrings("a$b $1 $t$ x $t$ c") == "a$b $1   c")
        #expect(AppTriggerSource.withoutCommentsAndStrings("a$$$ x $$ y $$") == "a$$$ x  ")
        #expect(AppTriggerSource.withoutCommentsAndStrings(#"d := name'\'; x"#) == "d := name ; x")
    }
}
